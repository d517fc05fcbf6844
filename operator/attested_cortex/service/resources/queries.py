"""Inputs of the operations whose HTTP form carries them in the path or the query string
(``GET /v1/memories/{id}``, ``GET /v1/memories?namespace=&limit=``, ...), as pydantic models.

The OpenAPI document derives those routes' parameters from these models
(:func:`attested_cortex.server.openapi.params_of`) and the MCP tools take them as their
arguments (:mod:`attested_cortex.mcp.tools`), so each wire shape has one typed definition.
Bodies keep their models in :mod:`.commands` and :mod:`.graph_commands`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from attested_cortex.namespaces import namespace_problem
from attested_cortex.service.resources.commands import UpdateMemory
from attested_cortex.service.resources.graph_commands import Id

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class MemoryRef(BaseModel):
    """One memory by id (read, delete, verify)."""

    model_config = _STRICT

    id: Id = Field(description="Memory id (UUID)")


#: The ``receipts`` flag of a read (one definition: gets, listings and recalls take it).
RECEIPTS_DESCRIPTION = ("Add `receipts`: for each returned memory the inclusion proof of the "
                        "audit event that last wrote it, against one signed checkpoint "
                        "(ADR 0104)")


class ReadOptions(BaseModel):
    """What ``GET /v1/memories/{id}`` takes in its query string."""

    model_config = _STRICT

    receipts: bool = Field(False, description=RECEIPTS_DESCRIPTION)


class MemoryRead(MemoryRef):
    """One memory by id, to read (``memory_get``), with its receipt on request."""

    receipts: bool = Field(False, description=RECEIPTS_DESCRIPTION)


class LinkRef(BaseModel):
    """One link by id (verify)."""

    model_config = _STRICT

    id: Id = Field(description="Link id (UUID)")


class ListMemories(BaseModel):
    """Live memories of a namespace subtree, newest first by creation, one page at a time
    (``next`` in the answer is the next page's ``cursor``)."""

    model_config = _STRICT

    namespace: str | None = Field(None, max_length=512,
                                  description="This namespace and its children (all when absent)")
    limit: int = Field(50, ge=1, le=500, description="At most this many memories")
    cursor: str | None = Field(None, max_length=200,
                               description="The `next` of the previous page (absent: the "
                               "newest memories)")
    receipts: bool = Field(False, description=RECEIPTS_DESCRIPTION)

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, value: str | None) -> str | None:
        problem = None if value is None else namespace_problem(value)
        if problem is not None:
            raise ValueError(f"namespace {problem}")
        return value


class LinksPage(BaseModel):
    """One page of a memory's links, oldest first by creation (``next`` in the answer is the
    next page's ``cursor``)."""

    model_config = _STRICT

    limit: int = Field(100, ge=1, le=1000, description="At most this many links")
    cursor: str | None = Field(None, max_length=200,
                               description="The `next` of the previous page (absent: the "
                               "oldest links)")


class TimelineQuery(BaseModel):
    """A memory's links ordered by validity."""

    model_config = _STRICT

    memory_id: Id = Field(description="Memory id (UUID)")


class AuditQuery(BaseModel):
    """Verify the signed_events chain."""

    model_config = _STRICT

    deep: bool = Field(False, description="Also sweep every memory and link row against its "
                       "latest write record")


class ProofQuery(BaseModel):
    """An event's inclusion proof in a checkpointed tree (issue 40)."""

    model_config = _STRICT

    seq: int = Field(ge=1, description="The event's sequence number")
    size: int | None = Field(None, ge=1, description="The tree size the proof is for "
                             "(absent: the latest checkpoint's, cut now when it does not "
                             "hold the event yet)")


class ConsistencyQuery(BaseModel):
    """The proof that a tree of ``to`` events extends the tree of ``from`` events."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    from_: int = Field(alias="from", ge=1, description="The older tree size")
    to: int | None = Field(None, ge=1, description="The newer tree size (absent: the latest "
                           "checkpoint's)")


class UpdateMemoryById(UpdateMemory):
    """``PATCH /v1/memories/{id}`` as one object: the id and the fields to change."""

    id: Id = Field(description="Memory id (UUID)")

    def fields(self) -> UpdateMemory:
        """The update without its id (what the service takes)."""
        return UpdateMemory.model_validate(self.model_dump(exclude={"id"}, exclude_unset=True),
                                           strict=False)
