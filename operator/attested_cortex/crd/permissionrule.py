"""PermissionRule: who may do what in which memory namespaces, as spec and status models.

The CEL rules on ``spec.namespace`` check the memory-namespace pattern syntax at admission:
``/``-separated segments of ``[a-z0-9._-]``, ``*`` (one level) and ``**`` (any depth), at most
512 characters and 8 levels, no empty, ``.`` or ``..`` segments. Read by the renderer
(``kinds``) and, later, by the operator when it hands rules to the cortex server.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, StringConstraints

from attested_cortex.crd.common import CommonStatus, CortexReference, CrdModel

Operation = Literal[
    "*", "store", "update", "delete", "link", "invalidate", "recall", "search",
    "kg_query", "kg_paths", "transcript",
]  # fmt: skip
Decision = Literal["Allow", "Deny", "AskUser"]
AgentPattern = Annotated[str, StringConstraints(min_length=1, max_length=253)]

MAX_PATTERN_LENGTH: Final = 512
MAX_PATTERN_LEVELS: Final = 8

#: CEL checks of a namespace pattern, each with the message a user sees when it fails.
NAMESPACE_PATTERN_RULES: Final[list[dict[str, str]]] = [
    {
        "rule": f"self.split('/').size() <= {MAX_PATTERN_LEVELS}",
        "message": f"namespace pattern has more than {MAX_PATTERN_LEVELS} levels",
    },
    {
        "rule": "self.split('/').all(s, s != '')",
        "message": "namespace pattern has an empty segment",
    },
    {
        "rule": "self.split('/').all(s, s != '.' && s != '..')",
        "message": "namespace pattern segments may not be '.' or '..'",
    },
    {
        "rule": "self.split('/').all(s, s == '*' || s == '**' || s.matches('^[a-z0-9._-]+$'))",
        "message": "namespace pattern segments are [a-z0-9._-] characters, '*' or '**'",
    },
]


def namespace_pattern_extra() -> dict[str, Any]:
    """Schema extras of a memory-namespace pattern string."""
    return {"x-kubernetes-validations": NAMESPACE_PATTERN_RULES}


class PermissionRuleSpec(CrdModel):
    """Desired state of a PermissionRule."""

    cortex_ref: CortexReference = Field(description="The MemoryCortex the rule applies to.")
    namespace: str = Field(
        description="Memory-namespace pattern: '/'-separated segments of [a-z0-9._-], "
        "'*' for one level and '**' for any depth, e.g. team/*/notes or projects/**.",
        min_length=1,
        max_length=MAX_PATTERN_LENGTH,
        json_schema_extra=namespace_pattern_extra(),
    )
    agents: list[AgentPattern] = Field(
        description="Agent ids the rule applies to; '*' matches every agent.",
        min_length=1,
        max_length=256,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    operations: list[Operation] = Field(
        description="Operations the rule covers; '*' covers all of them.",
        min_length=1,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    decision: Decision = Field(
        description="Allow, Deny, or AskUser (hold the operation for a human decision)."
    )
    inherit: bool = Field(
        default=True,
        description="Whether the rule also governs child namespaces of the ones it matches.",
    )
    priority: int = Field(
        default=0,
        ge=-1000,
        le=1000,
        description="Order among rules matching the same operation; higher wins.",
    )
    reason: str | None = Field(
        default=None,
        description="Why the rule exists; shown with the decisions it makes.",
        max_length=1024,
    )


class PermissionRuleStatus(CommonStatus):
    """Observed state of a PermissionRule."""
