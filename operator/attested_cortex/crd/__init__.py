"""The custom resources of attested-cortex: pydantic models and their rendered CRDs.

Public surface: the spec/status models of the kinds, ``KINDS`` and ``build_crd`` (one
CRD dict per kind) and the YAML rendering used by ``cortexctl crds``. The operator's
builders and controllers import the models from here.
"""

from attested_cortex.crd.agentidentity import AgentIdentitySpec, AgentIdentityStatus
from attested_cortex.crd.common import GROUP, VERSION, Condition
from attested_cortex.crd.hookchain import HookChainSpec, HookChainStatus
from attested_cortex.crd.kinds import KINDS, Kind, build_crd
from attested_cortex.crd.memorycortex import MemoryCortexSpec, MemoryCortexStatus
from attested_cortex.crd.permissionrule import PermissionRuleSpec, PermissionRuleStatus
from attested_cortex.crd.rendering import render_all, rendered_files, write_files

__all__ = [
    "GROUP",
    "KINDS",
    "VERSION",
    "AgentIdentitySpec",
    "AgentIdentityStatus",
    "Condition",
    "HookChainSpec",
    "HookChainStatus",
    "Kind",
    "MemoryCortexSpec",
    "MemoryCortexStatus",
    "PermissionRuleSpec",
    "PermissionRuleStatus",
    "build_crd",
    "render_all",
    "rendered_files",
    "write_files",
]
