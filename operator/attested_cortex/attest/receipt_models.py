"""The wire shape of read receipts (issue 40, ADR 0104): declared once, here, below both the
server's responses and the spoke-memory family's answers, which both carry it."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ReceiptOut(BaseModel):
    """The proof that the audit event which last wrote a memory is in a signed tree."""

    seq: int = Field(description="The event's sequence number")
    leaf_index: int = Field(description="Its leaf in the tree (`seq - 1`)")
    event_type: str = Field(description="`memory.stored`, `memory.updated`, ...")
    event_hash: str = Field(description="The event's chain hash (base64); the leaf hash is "
                            "SHA-256(0x00 || it)")
    record: str = Field(description="The event's payload, the write record (deterministic "
                        "CBOR, base64: docs/attestation.md, \"Write records\")")
    leaf_hash: str = Field(description="RFC 9162 leaf hash (base64)")
    proof: list[str] = Field(description="RFC 9162 inclusion proof to `root_hash` (base64)")


class ReceiptsOut(BaseModel):
    """With `receipts: true`: every returned memory's receipt, all against one checkpoint."""

    tree_size: int = Field(description="The checkpoint's tree size")
    root_hash: str = Field(description="The checkpoint's root hash (base64)")
    checkpoint: str = Field(description="The C2SP signed note, with the cosignatures its "
                            "witnesses sent")
    log_key: str | None = Field(description="The log's note verifier key")
    memories: dict[str, ReceiptOut | None] = Field(
        description="By memory id; null for a row that matches no record of the chain")
