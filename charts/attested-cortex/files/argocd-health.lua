-- Argo CD health of the four attested-cortex kinds (MemoryCortex, PermissionRule, HookChain,
-- AgentIdentity): one script, since they share the status shape. Install it as
-- resource.customizations.health.cortex.attested.dev_<Kind> in argocd-cm (docs/gitops.md).
-- It reads what Flux's kstatus reads (docs/adr/0046-gitops-health.md):
--   a generation not observed yet, Reconciling=True or Ready=False -> Progressing
--   Stalled=True (a failed migration, a refused spec, a lost key)   -> Degraded
--   Ready=True                                                       -> Healthy
--   spec.paused on a MemoryCortex                                    -> Suspended
-- Tested with lua5.4 against the operator's own statuses (tests/gitops/test_health.py).
local hs = {status = "Progressing", message = "waiting for the operator"}
if obj.spec ~= nil and obj.spec.paused == true then
  hs.status = "Suspended"
  hs.message = "spec.paused is true"
  return hs
end
local status = obj.status
if status == nil or status.conditions == nil then
  return hs
end
if obj.metadata ~= nil and obj.metadata.generation ~= nil
    and status.observedGeneration ~= obj.metadata.generation then
  hs.message = "generation " .. tostring(obj.metadata.generation) .. " not observed yet"
  return hs
end
local found = {}
for _, condition in ipairs(status.conditions) do
  found[condition.type] = condition
end
local function said(condition)
  return (condition.reason or "") .. ": " .. (condition.message or "")
end
if found.Stalled ~= nil and found.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = said(found.Stalled)
elseif found.Reconciling ~= nil and found.Reconciling.status == "True" then
  hs.message = said(found.Reconciling)
elseif found.Ready ~= nil and found.Ready.status == "True" then
  hs.status = "Healthy"
  hs.message = said(found.Ready)
elseif found.Ready ~= nil then
  hs.message = said(found.Ready)
end
return hs
