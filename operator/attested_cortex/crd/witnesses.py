"""``spec.audit.witnesses``: the witnesses of a cortex's signed checkpoints, and what
``status.audit.witnesses`` says of each (issue 40, ADRs 0101 and 0102).

A witness is either external (``url``: a c2sp.org/tlog-witness the server offers each
checkpoint to) or run by the operator (``run``: a Deployment of ``cortexctl audit witness
--every``, with its own key Secret and state volume). Exactly one of the two. Imported by
:mod:`.settings` and :mod:`.memorycortex`. Pure data.
"""

from __future__ import annotations

from typing import Final

from pydantic import ConfigDict, Field

from attested_cortex.crd.common import STORAGE_SIZE_PATTERN, CrdModel

#: An operator-run witness's objects are ``<cortex>-witness-<name>``.
RUN_NAME_MAX: Final = 40
RUN_NAME_PATTERN: Final = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class RunWitness(CrdModel):
    """A witness the operator runs: one pod, its key, its state volume."""

    interval_seconds: int = Field(
        default=30, ge=5, le=3600,
        description="Seconds between two rounds (fetch, check, cosign); 5 to 3600.")
    size: str = Field(
        default="16Mi", max_length=32, pattern=STORAGE_SIZE_PATTERN,
        description="Size of the witness's state volume (a PersistentVolumeClaim: the last "
        "cosigned checkpoint must outlive the pod, or a restarted witness would trust any "
        "history again).")
    storage_class_name: str | None = Field(
        default=None, max_length=253,
        description="StorageClass of the state volume; the cluster default when absent.")


class AuditWitness(CrdModel):
    """A witness of the audit checkpoints: external (url) or run by the operator (run)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.url) != has(self.run)",
        "message": "a witness has exactly one of url (external) or run (operator-run)",
    }, {
        "rule": f"!has(self.run) || (size(self.name) <= {RUN_NAME_MAX} && "
                f"self.name.matches('{RUN_NAME_PATTERN}'))",
        "message": f"an operator-run witness's name is a DNS label of at most {RUN_NAME_MAX} "
                   "characters (it names the witness's objects)",
    }]})

    name: str = Field(
        min_length=1, max_length=255, pattern=r"^[^\s+]+$",
        description="The witness's name (its key name; no space, no '+'; for run a DNS "
        f"label of at most {RUN_NAME_MAX} characters, the suffix of its objects' names).")
    url: str | None = Field(
        default=None, min_length=8, max_length=2048, pattern=r"^https?://",
        description="Base URL of an external witness (POST <url>/add-checkpoint).")
    run: RunWitness | None = Field(
        default=None,
        description="Run this witness as a Deployment of its own (ADR 0102): its Ed25519 key "
        "in a Secret the operator generates, its state on its own volume; it pulls each "
        "checkpoint with audit.read and reports what it cosigned or refused in its status "
        "ConfigMap, which status.audit.witnesses shows.")


class WitnessStatus(CrdModel):
    """What one operator-run witness last did."""

    name: str = Field(max_length=255, description="The witness's name.")
    cosigned_size: int | None = Field(
        default=None, ge=0, description="Tree size of the last checkpoint it cosigned.")
    cosigned_at: str | None = Field(
        default=None, max_length=64, description="When it cosigned it (RFC 3339).")
    last_error: str | None = Field(
        default=None, max_length=1024,
        description="Its last refusal (both sizes and roots) or why its last round could "
        "not run; absent after a round that went well.")


class AuditStatus(CrdModel):
    """Where the audit chain's witnesses stand."""

    witnesses: list[WitnessStatus] = Field(
        default_factory=list, max_length=32,
        description="Each operator-run witness, by name.")
