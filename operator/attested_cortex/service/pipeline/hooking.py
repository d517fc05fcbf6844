"""Taking a pre- hook's payload back into an operation's request.

The pipeline (:mod:`.running`) fires the hooks; each Call re-validates what a hook
returned with :func:`revalidate`, so a hook cannot smuggle in what a client could not send
(a model's rules, and the body bounds of :mod:`attested_cortex.jsonbounds`: a hook's answer
may nest a little deeper than a body, the request it makes may not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from attested_cortex.errors import InvalidInputError
from attested_cortex.jsonbounds import check_value

M = TypeVar("M", bound=BaseModel)


def revalidate(model: type[M], payload: Mapping[str, Any]) -> M:
    """Validate a payload a pre-hook returned (a Modify that breaks the input rules is 400)."""
    try:
        # Strings were checked for lone surrogates when the answer was parsed.
        check_value(payload, surrogates=False)
    except InvalidInputError as exc:
        raise InvalidInputError(
            "a hook modified the request into an invalid one", code="hook_invalid_modify",
            errors=[str(exc)],
        ) from exc
    try:
        return model.model_validate(dict(payload))
    except ValidationError as exc:
        raise InvalidInputError(
            "a hook modified the request into an invalid one", code="hook_invalid_modify",
            errors=[e["msg"] for e in exc.errors()],
        ) from exc
