"""Plain-text rendering of the pipeline's live state, for ``cortexctl doctor --hooks``.

Pure: takes :meth:`HookPipeline.describe` output (or the ``hooks`` object of a server's
``/v1/capabilities``) and returns lines to print.
"""

from __future__ import annotations

from attested_cortex.hooks.describing import RawHooksDescription


def render_hooks(description: RawHooksDescription) -> str:
    """One header line for the configuration, then one line per hook and event."""
    config = description["config"]
    status = "valid" if config["valid"] else f"REJECTED NEW FILE: {config['last_error']}"
    lines = [f"hook config {config['path'] or '(none)'}: generation {config['generation']}, "
             f"loaded {config['loaded_at']}, {status}"]
    if not description["by_event"]:
        lines.append("  no hooks configured")
    for event, hooks in sorted(description["by_event"].items()):
        for hook in hooks:
            detail = f"; last error: {hook['last_error']}" if hook["last_error"] else ""
            lines.append(
                f"  {event:<16} {hook['name']:<24} {hook['mode']:<7} prio={hook['priority']:<4} "
                f"timeout={hook['timeout_ms']}ms fail={hook['fail_mode']:<6} "
                f"state={hook['state']} restarts={hook['restarts']}{detail}"
            )
    return "\n".join(lines)
