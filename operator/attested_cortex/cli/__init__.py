"""``cortexctl``: one module per command, dispatched by :mod:`.main`.

The server side: :mod:`.serve`, :mod:`.migrate`, :mod:`.doctor`, :mod:`.audit`; the
operator: :mod:`.operator`, :mod:`.crds`; identities and credentials: :mod:`.identity`,
:mod:`.tokens`; agents' local hosts: :mod:`.mcp` (stdio MCP relay) and :mod:`.hookd` (a
stdio hook program served as a daemon). Each module parses its arguments and calls the
package; heavy imports wait until its command runs.
"""
