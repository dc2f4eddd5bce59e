--- MPI worker of tests/dist_spec.lua: all_gather, reduce_scatter, send/recv and groups across the
-- ranks of `mpirun -np 2`, reported as lines rank=<r> <key>=<values> (tests/dist/common.lua).
local dle = require("dle")
local common = require("dist.common")
local dist = dle.dist

local pg <close>, rank, _, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)
local world = dist.world_size()

-- all_gather in every dtype: slot i holds rank i - 1's values; slots may be non-contiguous views
for _, dt in ipairs(common.DTYPES) do
  local t = dle.tensor(common.values(dt, rank), {dtype = dt}):view(2, 3)
  local out = {}
  for i = 1, world do out[i] = dle.zeros({3, 2}, {dtype = dt}):t() end
  dist.all_gather(out, t)
  local flat = {}
  for i = 1, world do flat[i] = out[i]:contiguous():view(-1) end
  emit("all_gather." .. dt, dle.cat(flat, 1))
end

-- reduce_scatter: rank r gets the sum over ranks of their in_list[r + 1]
for _, op in ipairs({"sum", "max", "mean"}) do
  local ins = {}
  for i = 1, world do ins[i] = dle.tensor({10 * i + rank, -rank, i}, {dtype = "float64"}) end
  local out = dle.zeros(3, {dtype = "float64"})
  emit("reduce_scatter." .. op, dist.reduce_scatter(out, ins, op))
end
for _, dt in ipairs({"int32", "float16", "bool"}) do
  local ins = {}
  for i = 1, world do ins[i] = dle.tensor({{i + rank, 1}, {0, rank}}, {dtype = dt}) end
  local out = dle.zeros({2, 2}, {dtype = dt})
  emit("reduce_scatter_dtype." .. dt, dist.reduce_scatter(out, ins))
end

-- send / recv: rank 0 sends two tensors (tags 1 and 2) to rank 1, which receives them out of order;
-- then rank 1 answers into a non-contiguous view
if rank == 0 then
  dist.send(dle.arange(1, 7, {dtype = "int64"}), 1, {tag = 1})
  dist.send(dle.tensor({0.5, 1.5}), 1, {tag = 2})
  local back = dle.zeros(3, 2)
  local from = dist.recv(back:t(), 1)
  emit("answer", back)
  emit("answer_from", from)
else
  local b = dle.zeros(2)
  local from2 = dist.recv(b, 0, {tag = 2})
  local a = dle.zeros({2, 3}, {dtype = "int64"})
  local from1 = dist.recv(a, nil, {tag = 1})
  emit("tag2", b)
  emit("tag1", a)
  emit("from", from1 + 10 * from2)
  dist.send(dle.tensor({{1, 2, 3}, {4, 5, 6}}), 0)
end

-- groups: {1} alone, and the world in reverse order
local solo = dist.new_group({1})
local rev = dist.new_group({1, 0})
emit("solo_rank", dist.rank(solo))
emit("solo_size", dist.world_size(solo))
emit("rev_rank", dist.rank(rev))
if rank == 1 then
  emit("solo_sum", dist.all_reduce(dle.tensor({5}), "sum", {group = solo}))
  dist.barrier({group = solo})
end
local out = {dle.zeros(1), dle.zeros(1)}
dist.all_gather(out, dle.tensor({rank}), {group = rev})
emit("rev_gather", dle.cat(out, 1))
emit("rev_broadcast", dist.broadcast(dle.tensor({rank + 7}), 1, {group = rev}))
if rank == 0 then
  emit("not_member", select(2, pcall(dist.all_reduce, dle.ones(1), "sum", {group = solo})))
end

-- errors name the function, on every rank alike
emit("bad_slots", select(2, pcall(dist.all_gather, {dle.zeros(2)}, dle.zeros(2))))
emit("bad_shape", select(2, pcall(dist.all_gather, {dle.zeros(2), dle.zeros(3)}, dle.zeros(2))))
emit("bad_dst", select(2, pcall(dist.send, dle.zeros(2), 5)))
emit("bad_group", select(2, pcall(dist.barrier, {group = 3})))
emit("bad_rank_list", select(2, pcall(dist.new_group, {0, 0})))
emit("bad_tag", select(2, pcall(dist.send, dle.zeros(2), 0, {tag = -1})))
emit("bad_option", select(2, pcall(dist.barrier, {grup = rev})))
emit("done", 1)
