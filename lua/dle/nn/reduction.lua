--- The reduction step of the losses: "none" keeps the per-element loss, "sum" adds it, "mean"
-- (the default) averages it (the caller has checked r with check.reduction).
return function(loss, r)
  if r == "none" then return loss end
  if r == "sum" then return loss:sum() end
  return loss:mean()
end
