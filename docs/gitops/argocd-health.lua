-- Argo CD health check for kafkaqueues.io resources (KafkaCluster, ShareQueue,
-- DeadLetterRoute). Put it in argocd-cm under
--   resource.customizations.health.kafkaqueues.io_ShareQueue   (and _KafkaCluster, _DeadLetterRoute)
-- It reads the kstatus conditions the operator writes: Stalled=True is Degraded (the user must
-- change something), Ready=True at the current generation is Healthy, a resource whose
-- kafkaqueues.io/reconcile annotation holds changes back (Paused, Plan, ObserveOnly, or an
-- invalid value) is Suspended, anything else is Progressing.
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end
local ready, stalled, reconciling
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then ready = c end
  if c.type == "Stalled" then stalled = c end
  if c.type == "Reconciling" then reconciling = c end
end
if reconciling ~= nil and reconciling.status ~= "True" and (reconciling.reason == "Paused" or reconciling.reason == "InvalidReconcileMode"
    or reconciling.reason == "Planned" or reconciling.reason == "ObserveOnly") then
  hs.status = "Suspended"
  hs.message = reconciling.message
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.reason .. ": " .. stalled.message
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
hs.status = "Progressing"
if ready ~= nil then
  hs.message = ready.reason .. ": " .. ready.message
else
  hs.message = "Reconciling"
end
return hs
