--- MPI worker of tests/dist_spec.lua: dle.dist.pipeline over the 2 ranks of `mpirun -np 2` (a
-- Linear+Tanh stage, then a Linear stage) against the same two stages run in one process, for both
-- schedules and several microbatch counts, in float64; reported as lines rank=<r> <key>=<value>.
local dle = require("dle")
local common = require("dist.common")
local dist = dle.dist
local nn, F = dle.nn, dle.nn.functional

local pg <close>, rank, _, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)
local F64 = "float64"

-- the two stages, made alike on every rank from fixed generators
local function stages()
  return {nn.Sequential(nn.Linear(6, 8, {generator = dle.Generator(1), dtype = F64}), nn.Tanh()),
          nn.Linear(8, 3, {generator = dle.Generator(2), dtype = F64})}
end
local x = dle.randn({8, 6}, {generator = dle.Generator(3), dtype = F64})
local y = dle.randint(1, 4, {8}, {generator = dle.Generator(4), dtype = "int64"})

-- the reference: both stages in this process, the whole batch
local ref = stages()
local ref_loss = F.cross_entropy(ref[2](ref[1](x)), y)
ref_loss:backward()
local function grads_of(m)
  local out = {}
  for _, p in ipairs(m:parameters()) do out[#out + 1] = p.grad end
  return out
end
local ref_grads = grads_of(ref[rank + 1])

for _, schedule in ipairs({"gpipe", "1f1b"}) do
  for _, m in ipairs({1, 2, 4}) do
    local st = stages()
    local pipe = dist.pipeline(st, {microbatches = m, schedule = schedule, loss_fn = F.cross_entropy})
    local key = schedule .. "." .. m
    local loss
    for _ = 1, 2 do   -- two steps: gradients accumulate as backward's do
      loss = pipe:step(rank == 0 and x or nil, rank == 1 and y or nil)
    end
    local worst = 0
    for k, g in ipairs(grads_of(st[rank + 1])) do
      worst = math.max(worst, (g - 2 * ref_grads[k]):abs():max():item())
    end
    emit("grad." .. key, worst)
    if rank == 1 then emit("loss." .. key, math.abs(loss - ref_loss:item())) end
    if rank == 0 then emit("loss_nil." .. key, tostring(loss == nil)) end
    emit("bubble." .. key, pipe.bubble)
  end
end

-- errors name the pipeline and the sizes
emit("bad_split", select(2, pcall(function()
  return dist.pipeline(stages(), {microbatches = 3, loss_fn = F.cross_entropy}):step(x, y)
end)))
emit("bad_stages", select(2, pcall(dist.pipeline, {nn.Tanh()}, {loss_fn = F.cross_entropy})))
emit("bad_schedule", select(2, pcall(dist.pipeline, stages(), {schedule = "zigzag", loss_fn = F.cross_entropy})))
-- a message on the pipeline's header tag that is not a header: an error, not a crash
local probe = dist.pipeline(stages(), {loss_fn = F.cross_entropy})
if rank == 0 then
  dist.send(dle.tensor({99, 1, 0, 0, 0, 0, 0, 0, 0, 0}, {dtype = "int64"}), 1, {tag = 101})
else
  emit("bad_header", select(2, pcall(probe._recv, probe, 0)))
end
emit("done", 1)
