--- MPI worker of tests/dist_spec.lua: all_reduce, broadcast and barrier across the ranks of
-- `mpirun -np 2`, reported as lines rank=<r> <key>=<values> (tests/dist/common.lua).
local dle = require("dle")
local common = require("dist.common")
local dist = dle.dist

local pg <close>, rank, _, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)
emit("world", dist.world_size())

-- every dtype and op on rank-dependent values (as a 2x3 tensor)
for _, dt in ipairs(common.DTYPES) do
  local ops = {"sum", "max", "min", "prod"}
  if common.FLOATS[dt] then ops[#ops + 1] = "mean" end
  for _, op in ipairs(ops) do
    local t = dle.tensor(common.values(dt, rank), {dtype = dt}):view(2, 3)
    local r = dist.all_reduce(t, op)
    emit(dt .. "." .. op, t)
    if not rawequal(r, t) then emit("not_self." .. dt .. "." .. op, 1) end
  end
end
-- 16-bit floats off the integer grid: each pair is added in float32 and rounded once
for _, dt in ipairs({"float16", "bfloat16"}) do
  local t = (dle.tensor({0.1, 1 / 3, 1000.7, -2.2e-3}) * (rank + 1)):to(dt)
  emit("fraction." .. dt, dist.all_reduce(t, "sum"):float())
end
-- the default op is sum; "avg" is "mean"
emit("default_op", dist.all_reduce(dle.tensor(common.values("float32", rank))))
emit("avg", dist.all_reduce(dle.tensor(common.values("float32", rank)), "avg"))

-- non-contiguous tensors, reduced in place through their views: a transpose and a narrow
for _, dt in ipairs({"float32", "float16", "bfloat16", "int64"}) do
  local base = dle.tensor(common.values(dt, rank), {dtype = dt}):view(3, 2)
  local view = base:t()
  local r = dist.all_reduce(view, "sum")
  emit("transposed." .. dt, base)
  emit("transposed_self." .. dt, tostring(rawequal(r, view)))
end
local row = dle.tensor({{1, 2, 3, 4}, {5, 6, 7, 8}}):mul_(rank + 1)
dist.all_reduce(row:narrow(2, 2, 2), "max")
emit("narrowed", row)

-- broadcast from root 1 in every dtype; the root's own tensor is unchanged
for _, dt in ipairs(common.DTYPES) do
  local t = dle.tensor(common.values(dt, rank), {dtype = dt})
  dist.broadcast(t, 1)
  emit("broadcast." .. dt, t)
end
local tb = dle.tensor({{1, 2}, {3, 4}, {5, 6}}):mul_(rank + 10)
dist.broadcast(tb:t(), 1)
emit("broadcast_transposed", tb)
emit("broadcast_default_root", dist.broadcast(dle.full({2}, rank + 3)))

-- barrier: rank 1 arrives 0.3 s late; rank 0 must wait for it
if rank == 1 then os.execute("sleep 0.3") end
local t0 = dle.time()
dist.barrier()
emit("barrier_wait", dle.time() - t0)

-- all_reduce{async_op = true}: a Work at once, the result after wait() (waited out of start
-- order), through a transposed view too, with mean's division
local a1 = dle.tensor(common.values("float32", rank))
local w1 = dist.all_reduce(a1, "sum", {async_op = true})
local a2 = dle.tensor({{1, 2, 3}, {4, 5, 6}}):mul_(rank + 1)
local w2 = dist.all_reduce(a2:t(), "mean", {async_op = true})
emit("async_type", getmetatable(w1).__name)
w2:wait()
w1:wait()
emit("async_sum", a1)
emit("async_mean_t", a2)
emit("async_done", tostring(w1:is_completed() and w1:wait()))

-- errors name the function, on every rank alike
emit("bad_root", select(2, pcall(dist.broadcast, dle.zeros(2), 2)))
emit("bad_op", select(2, pcall(dist.all_reduce, dle.zeros(2), "median")))
emit("done", 1)
