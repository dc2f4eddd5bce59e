--- dle.dist: data-parallel training across processes over MPI (torch.distributed's semantics).
-- Launch one process per rank with MPI, e.g.
--   mpirun -np 2 scripts/dle train.lua
-- and in the script:
--   local dist = dle.dist
--   local pg <close> = dist.init()       -- <close>: an error on one rank aborts every rank
--   local model = dist.DistributedDataParallel(Net())
-- A script run without mpirun is a world of one process (rank 0). Ranks are 0-based, as in MPI
-- and PyTorch (they are process numbers, not Lua indices). Collectives work on tensors of every
-- dtype, in place, and every rank must call them in the same order with tensors of the same
-- shape and dtype (not checked, as in PyTorch: a mismatch is undefined, often a hang). CPU tensors
-- go over MPI; CUDA tensors through NCCL (lua/dle/dist/nccl.lua), with the same checks.
-- MPI is loaded on the first init() (the separate module dle.dist_native), never by require("dle").
local dle = require("dle")
local check = require("dle.check")
local core = dle.core

local dist = {}

-- dle.dist_native, loaded on the first is_available() or init()
local mpi = require("dle.optional_module")("dle.dist_native", "dle.dist: ", "MPI",
  "libopenmpi-dev was missing when dle was built, or the install left the module out; "
  .. "install libopenmpi-dev and rebuild with scripts/build")

--- dist.is_available() -> true, or false and the reason: whether dle was built with MPI support.
-- Loads the MPI library (without initializing it).
function dist.is_available() return mpi.available() end

--- dist.is_initialized() -> whether init() was called (and finalize() was not).
function dist.is_initialized()
  local native = mpi.loaded()
  return native ~= nil and native.is_initialized()
end

--- dist.init() -> the process group handle.
-- Initializes MPI from the launch environment (mpirun sets it; without one, a world of size 1).
-- Idempotent. MPI is finalized when the program exits; or give the handle a <close> variable,
-- `local pg <close> = dle.dist.init()`, and leaving that scope finalizes MPI, while an error
-- leaving it aborts the whole job (MPI_Abort) instead of leaving the other ranks waiting forever
-- in a collective for this one.
function dist.init()
  local native, why = mpi.load()
  if not native then check.error(why) end
  return native.init()
end

--- dist.finalize(): finalizes MPI now (idempotent); dist can not be initialized again afterwards.
function dist.finalize()
  local native = mpi.loaded()
  if native then native.finalize() end
end

-- native, or an error naming fn when init() has not been called.
local function need(fn)
  local native = mpi.loaded()
  if native and native.is_initialized() then return native end
  check.error(string.format("%s: dle.dist is not initialized; call dle.dist.init() first", fn))
end

-- ---------------------------------------------------------------- groups

local Group = {}
Group.__index = Group
Group.__name = "dle.dist.Group"
function Group:__tostring() return "dle.dist.Group{" .. table.concat(self.ranks, ", ") .. "}" end

--- dist.new_group(ranks) -> a group of these world ranks (0-based), as PyTorch's new_group: every
-- rank calls it with the same list; collectives given {group = g} run among its ranks only, and a
-- rank's place in the group (dist.rank(g)) is its position in the list, from 0.
function dist.new_group(ranks)
  local m = need("new_group")
  check.table(ranks, "new_group", "ranks")
  local g = setmetatable({ranks = {}, _native = m.new_group(ranks), _index = {}}, Group)
  for i, r in ipairs(ranks) do g.ranks[i], g._index[r] = r, i - 1 end
  return g
end

-- The group of a call's options (nil: the world), checked.
local function group_of(opts, fn, extra)
  if opts == nil then return nil end
  opts = check.options(opts, fn, {"group", "tag", extra})
  local g = opts.group
  if g ~= nil and getmetatable(g) ~= Group then
    check.error(string.format("%s: group must be a group from dle.dist.new_group, got %s", fn, check.typename(g)))
  end
  return g
end

-- A world rank as its rank in group g (itself without a group); an error naming fn when it is
-- not one of the group's ranks.
local function place_in(g, r, fn, what)
  if not g then return r end
  local i = g._index[r]
  if not i then
    check.error(string.format("%s: %s %d is not in the group (ranks %s)", fn, what, r, table.concat(g.ranks, ",")))
  end
  return i
end

-- A world rank argument (what: "root", "dst", "src"), checked against the world.
local function check_rank(m, r, fn, what)
  r = check.integer(r, fn, what)
  local size = m.world_size()
  if r < 0 or r >= size then
    check.error(string.format("%s: %s %d is not a rank (ranks are 0..%d)", fn, what, r, size - 1))
  end
  return r
end

--- dist.rank(group) -> this process's rank, 0 .. world_size() - 1; with a group, its place in the
-- group, or -1 when it is not a member (as PyTorch's get_rank).
function dist.rank(group)
  local m = need("rank")
  if group == nil then return m.rank() end
  group_of({group = group}, "rank")
  return m.group_is_member(group._native) and m.group_rank(group._native) or -1
end

--- dist.world_size(group) -> the number of processes (in the group).
function dist.world_size(group)
  local m = need("world_size")
  if group == nil then return m.world_size() end
  group_of({group = group}, "world_size")
  return #group.ranks
end

--- dist.barrier({group}): returns once every rank (of the group) has reached it.
function dist.barrier(opts)
  local m = need("barrier")
  local g = group_of(opts, "barrier")
  m.barrier(g and g._native)
end

--- dist.abort(code): ends every rank of the job at once with exit status code (default 1).
function dist.abort(code)
  check.integer(code == nil and 1 or code, "abort", "code")
  need("abort").abort(code)
end

-- The tensor argument of a collective that writes into it: a tensor the engine would let us write
-- in place (the same rules as t:copy_), with no elements sharing memory.
local function check_writable(t, fn)
  check.tensor(t, fn, "tensor")
  if t.grad_fn then
    check.error(string.format("%s: cannot write in place into a tensor that is part of an autograd graph "
      .. "(shape %s); use a detached tensor", fn, check.shape_str(t)))
  end
  if t.requires_grad and dle.is_grad_enabled() then
    check.error(string.format("%s: a leaf tensor that requires grad (shape %s) cannot be written in "
      .. "place; do it under no_grad or on a detached tensor", fn, check.shape_str(t)))
  end
  for d, s in ipairs(t:stride()) do
    if s == 0 and t:size(d) > 1 then
      check.error(string.format("%s: cannot write into an expanded tensor of shape %s (several elements "
        .. "share memory); clone it first", fn, check.shape_str(t)))
    end
  end
end

-- Runs op(ptr, n, dtype) on t's elements in place: directly on a contiguous t, else on a
-- contiguous copy that is then copied back (write = false: nothing to copy back). ptr is device
-- memory for a CUDA tensor.
local function on_buffer(t, fn, write, op)
  local c = t:is_contiguous() and t or t:contiguous()
  local ptr, n, dtype = core._raw_buffer(c, fn, write, true)
  op(ptr, n, dtype)   -- c (and t) stay referenced by this frame meanwhile
  if write and c ~= t then dle.no_grad(function() t:copy_(c) end) end
  return t
end

-- The transport of a collective on tensor t among group g: dle.dist_native (MPI) for a CPU tensor,
-- NCCL's (lua/dle/dist/nccl.lua, the same functions) for a CUDA one.
local function via(m, g, t, fn)
  local device = t:device()
  if device == "cpu" then return m end
  return require("dle.dist.nccl").transport(m, g, tonumber(device:match(":(%d+)$")) or 0, fn)
end

local OPS = {sum = "sum", mean = "mean", avg = "mean", max = "max", min = "min", prod = "prod"}

-- The reduction a collective's op names (default "sum"), checked for tensor t.
local function reduction_of(op, t, fn)
  if op ~= nil and type(op) ~= "string" then
    check.error(fn .. ": op must be a string, got " .. check.typename(op))
  end
  local name = OPS[op or "sum"]
  if not name then
    check.error(fn .. ": unknown op '" .. op .. "' (expected sum, mean, avg, max, min or prod)")
  end
  if name == "mean" and not t:is_floating_point() then
    check.error(fn .. ": op '" .. op .. "' needs a floating-point tensor, got " .. t:dtype())
  end
  return name
end

-- ---------------------------------------------------------------- non-blocking work

local Work = {}
Work.__index = Work
Work.__name = "dle.dist.Work"

--- work:wait() -> true: returns once the operation is done: an isend with its tensor (which may
-- then change), an all_reduce with its result in the tensor.
function Work:wait()
  if self._request then
    need("wait").wait(self._request)
    self._request = nil
    local finish = self._finish
    self._tensor, self._finish = nil, nil
    if finish then finish() end
  end
  return true
end

--- work:is_completed() -> whether wait() would return at once. Each call lets MPI progress the
-- operations in flight (Open MPI moves them only inside MPI calls); wait() is still required.
function Work:is_completed()
  return self._request == nil or need("is_completed").test(self._request)
end

--- dist.all_reduce(t, op, {group, async_op}): see below.
--- dist.all_reduce(t, op, {group}) -> t, reduced in place across every rank (of the group).
-- op: "sum" (default), "mean" (or "avg"; float dtypes: the sum divided by world_size()), "max",
-- "min", "prod". Every dtype: bool reduces with or (sum, max) and and (min, prod); integers wrap
-- on overflow; float16 and bfloat16 are combined pairwise in float32 and rounded back (MPI has no
-- 16-bit float type: user-defined MPI ops). A non-contiguous t is reduced through a contiguous copy.
-- With {async_op = true} it returns a dle.dist.Work at once (MPI_Iallreduce; PyTorch's async_op):
-- t holds the result after work:wait(), and must not be used or changed before.
function dist.all_reduce(t, op, opts)
  local m = need("all_reduce")
  local g = group_of(opts, "all_reduce", "async_op")
  check_writable(t, "all_reduce")
  local name = reduction_of(op, t, "all_reduce")
  local x = via(m, g, t, "all_reduce")
  if opts and opts.async_op then
    if x ~= m then
      check.error("all_reduce: async_op is for CPU tensors (MPI) only; CUDA tensors go through NCCL, synchronously")
    end
    local c = t:is_contiguous() and t:detach() or t:contiguous()
    local ptr, n, dtype = core._raw_buffer(c, "all_reduce", true)
    local w = g and #g.ranks or m.world_size()
    local finish = function()
      dle.no_grad(function()
        if name == "mean" and w > 1 then c:div_(w) end
        if not t:is_contiguous() then t:copy_(c) end
      end)
    end
    return setmetatable({_request = m.iall_reduce(ptr, n, dtype, name == "mean" and "sum" or name, g and g._native),
                         _tensor = c, _finish = finish}, Work)
  end
  on_buffer(t, "all_reduce", true, function(ptr, n, dtype)
    x.all_reduce(ptr, n, dtype, name == "mean" and "sum" or name, g and g._native)
  end)
  if name == "mean" then
    local w = g and #g.ranks or m.world_size()
    if w > 1 then dle.no_grad(function() t:div_(w) end) end
  end
  return t
end

--- dist.broadcast(t, root, {group}) -> t, holding root's values on every rank (of the group), in place.
-- root: the 0-based world rank that sends (default 0; with a group, its first rank); its own t is only read.
function dist.broadcast(t, root, opts)
  local m = need("broadcast")
  local g = group_of(opts, "broadcast")
  root = root == nil and (g and g.ranks[1] or 0) or check_rank(m, root, "broadcast", "root")
  local groot = place_in(g, root, "broadcast", "root")
  local sender = m.rank() == root
  if sender then
    check.tensor(t, "broadcast", "tensor")
  else
    check_writable(t, "broadcast")
  end
  local x = via(m, g, t, "broadcast")
  return on_buffer(t, "broadcast", not sender, function(ptr, n, dtype)
    x.broadcast(ptr, n, dtype, groot, g and g._native)
  end)
end

-- ---------------------------------------------------------------- gather, scatter, point to point

-- A list of `size` tensors of t's shape, dtype and device (the per-rank slots of all_gather and
-- reduce_scatter), checked; write: each must be writable in place.
local function check_slots(list, t, size, fn, what, write)
  check.table(list, fn, what)
  if #list ~= size then
    check.error(string.format("%s: %s must hold %d tensors (one per rank), got %d", fn, what, size, #list))
  end
  for i, s in ipairs(list) do
    if write then check_writable(s, fn) else check.tensor(s, fn, what) end
    if s:dtype() ~= t:dtype() or check.shape_str(s) ~= check.shape_str(t) then
      check.error(string.format("%s: %s[%d] is %s %s, the tensor is %s %s", fn, what, i, s:dtype(),
                                check.shape_str(s), t:dtype(), check.shape_str(t)))
    end
    if s:device() ~= t:device() then
      check.error(string.format("%s: %s[%d] is on %s, the tensor on %s", fn, what, i, s:device(), t:device()))
    end
  end
end

--- dist.all_gather(out_list, t, {group}) -> out_list, whose i-th tensor holds rank i - 1's t (of
-- the group's ranks, in the group's order), as PyTorch's all_gather. out_list holds world_size()
-- tensors of t's shape and dtype, written in place.
function dist.all_gather(out_list, t, opts)
  local m = need("all_gather")
  local g = group_of(opts, "all_gather")
  check.tensor(t, "all_gather", "tensor")
  local size = g and #g.ranks or m.world_size()
  check_slots(out_list, t, size, "all_gather", "out_list", true)
  local send = t:contiguous()
  local recv = dle.empty({size, t:numel()}, {dtype = t:dtype(), device = t:device()})
  local sp, n, dtype = core._raw_buffer(send, "all_gather", false, true)
  local rp = core._raw_buffer(recv, "all_gather", true, true)
  via(m, g, t, "all_gather").all_gather(sp, n, dtype, rp, g and g._native)
  dle.no_grad(function()
    for i, o in ipairs(out_list) do o:copy_(recv[i]:view(t:shape())) end
  end)
  return out_list
end

--- dist.reduce_scatter(out, in_list, op, {group}) -> out, holding the reduction over the ranks of
-- their in_list[rank + 1] (op as all_reduce's: sum by default, mean, max, min, prod), as
-- PyTorch's reduce_scatter. in_list holds world_size() tensors of out's shape and dtype.
function dist.reduce_scatter(out, in_list, op, opts)
  local m = need("reduce_scatter")
  local g = group_of(opts, "reduce_scatter")
  check_writable(out, "reduce_scatter")
  local size = g and #g.ranks or m.world_size()
  check_slots(in_list, out, size, "reduce_scatter", "in_list", false)
  local name = reduction_of(op, out, "reduce_scatter")
  local flat = {}
  for i, s in ipairs(in_list) do flat[i] = s:reshape({-1}) end
  local send = dle.no_grad(function() return dle.stack(flat, 1):contiguous() end)
  local sp = core._raw_buffer(send, "reduce_scatter", false, true)
  local x = via(m, g, out, "reduce_scatter")
  on_buffer(out, "reduce_scatter", true, function(ptr, n, dtype)
    x.reduce_scatter(sp, n, dtype, name == "mean" and "sum" or name, ptr, g and g._native)
  end)
  if name == "mean" and size > 1 then dle.no_grad(function() out:div_(size) end) end
  return out
end

-- The tag of a point-to-point call (default 0).
local function tag_of(opts, fn)
  local tag = opts and opts.tag
  if tag == nil then return 0 end
  tag = check.integer(tag, fn, "tag")
  if tag < 0 or tag > 32767 then check.error(string.format("%s: tag must be in 0..32767, got %d", fn, tag)) end
  return tag
end

-- What send and isend share: the checked arguments, the transport (MPI's or NCCL's), and t's
-- values as a contiguous buffer c (ptr, n, dtype) to send to the group rank gdst with tag.
local function send_args(fn, t, dst, opts)
  local m = need(fn)
  local g = group_of(opts, fn)
  check.tensor(t, fn, "tensor")
  dst = check_rank(m, dst, fn, "dst")
  local gdst, tag = place_in(g, dst, fn, "dst"), tag_of(opts, fn)
  local c = t:contiguous()
  if c == t then c = t:detach() end   -- held for isend's work: the buffer, not t's autograd history
  local ptr, n, dtype = core._raw_buffer(c, fn, false, true)
  return via(m, g, t, fn), ptr, n, dtype, gdst, tag, g and g._native, c
end

--- dist.send(t, dst, {group, tag}): sends t's elements to world rank dst, which receives them
-- with dist.recv (blocking until MPI has taken them).
function dist.send(t, dst, opts)
  local m, ptr, n, dtype, gdst, tag, comm = send_args("send", t, dst, opts)
  m.send(ptr, n, dtype, gdst, tag, comm)
end

--- dist.isend(t, dst, {group, tag}) -> work: send's non-blocking form, as PyTorch's isend; t must
-- not change until work:wait() returns (a work collected unwaited waits for its send).
function dist.isend(t, dst, opts)
  local m, ptr, n, dtype, gdst, tag, comm, c = send_args("isend", t, dst, opts)
  return setmetatable({_request = m.isend(ptr, n, dtype, gdst, tag, comm), _tensor = c}, Work)
end

--- dist.recv(t, src, {group, tag}) -> the world rank it came from: receives into t (in place) the
-- elements world rank src sent (src nil: any rank); a message of another size is an error.
function dist.recv(t, src, opts)
  local m = need("recv")
  local g = group_of(opts, "recv")
  check_writable(t, "recv")
  local gsrc = -1
  if src ~= nil then gsrc = place_in(g, check_rank(m, src, "recv", "src"), "recv", "src") end
  local tag, from = tag_of(opts, "recv"), nil
  local x = via(m, g, t, "recv")
  on_buffer(t, "recv", true, function(ptr, n, dtype) from = x.recv(ptr, n, dtype, gsrc, tag, g and g._native) end)
  return g and g.ranks[from + 1] or from
end

-- dist.DistributedDataParallel(model, opts) (lua/dle/dist/ddp.lua) and dist.tensor_parallel
-- (lua/dle/dist/tensor_parallel.lua), loaded on first use: they need dle.nn, which scripts using
-- only the collectives need not load.
setmetatable(dist, {__index = function(t, k)
  if k == "DistributedDataParallel" then
    local ddp = require("dle.dist.ddp")
    rawset(t, k, ddp)
    return ddp
  end
  if k == "pipeline" then   -- dle.dist.pipeline(stages, opts)
    local pipeline = require("dle.dist.pipeline")
    rawset(t, k, pipeline)
    return pipeline
  end
  if k == "tensor_parallel" then   -- dle.dist.tensor_parallel (ColumnLinear, RowLinear): needs dle.nn too
    local tp = require("dle.dist.tensor_parallel")
    rawset(t, k, tp)
    return tp
  end
end})

check.export(dist)
return dist
