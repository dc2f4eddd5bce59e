--- dle.dist: data-parallel training across processes over MPI (torch.distributed's semantics).
-- Launch one process per rank with MPI, e.g.
--   mpirun -np 2 scripts/dle train.lua
-- and in the script:
--   local dist = dle.dist
--   local pg <close> = dist.init()       -- <close>: an error on one rank aborts every rank
--   local model = dist.DistributedDataParallel(Net())
-- A script run without mpirun is a world of one process (rank 0). Ranks are 0-based, as in MPI
-- and PyTorch (they are process numbers, not Lua indices). Collectives work on CPU tensors of
-- every dtype, in place, and every rank must call them in the same order with tensors of the
-- same shape and dtype (not checked, as in PyTorch: a mismatch is undefined, often a hang).
-- MPI is loaded on the first init() (the separate module dle.dist_native), never by require "dle".
local dle = require "dle"
local check = require "dle.check"
local core = dle.core

local dist = {}

local native, native_error   -- dle.dist_native once loaded, or why it could not be

local function load_native()
  if native or native_error then return native end
  local ok, m = pcall(require, "dle.dist_native")
  if ok then
    native = m
  elseif package.searchpath("dle.dist_native", package.cpath) then
    native_error = "dle.dist: the MPI module dle.dist_native failed to load: " .. tostring(m)
  else
    -- either the build found no MPI or an install left the module out: the message names both
    local core_path = package.searchpath("dle.core", package.cpath)
    native_error = "dle.dist: MPI support was not built (no dle/dist_native.so beside " .. tostring(core_path)
      .. ": libopenmpi-dev was missing when dle was built, or the install left the module out; "
      .. "install libopenmpi-dev and rebuild with scripts/build)"
  end
  return native
end

--- dist.is_available() -> true, or false and the reason: whether dle was built with MPI support.
-- Loads the MPI library (without initializing it).
function dist.is_available()
  if load_native() then return true end
  return false, native_error
end

--- dist.is_initialized() -> whether init() was called (and finalize() was not).
function dist.is_initialized()
  return native ~= nil and native.is_initialized()
end

--- dist.init() -> the process group handle.
-- Initializes MPI from the launch environment (mpirun sets it; without one, a world of size 1).
-- Idempotent. MPI is finalized when the program exits; or give the handle a <close> variable,
-- `local pg <close> = dle.dist.init()`, and leaving that scope finalizes MPI, while an error
-- leaving it aborts the whole job (MPI_Abort) instead of leaving the other ranks waiting forever
-- in a collective for this one.
function dist.init()
  if not load_native() then check.error(native_error) end
  return native.init()
end

--- dist.finalize(): finalizes MPI now (idempotent); dist can not be initialized again afterwards.
function dist.finalize()
  if native then native.finalize() end
end

-- native, or an error naming fn when init() has not been called.
local function need(fn)
  if native and native.is_initialized() then return native end
  check.error(string.format("%s: dle.dist is not initialized; call dle.dist.init() first", fn))
end

--- dist.rank() -> this process's rank, 0 .. world_size() - 1.
function dist.rank() return need("rank").rank() end

--- dist.world_size() -> the number of processes.
function dist.world_size() return need("world_size").world_size() end

--- dist.barrier(): returns once every rank has reached it.
function dist.barrier() need("barrier").barrier() end

--- dist.abort(code): ends every rank of the job at once with exit status code (default 1).
function dist.abort(code)
  check.integer(code == nil and 1 or code, "abort", "code")
  need("abort").abort(code)
end

-- The tensor argument of a collective that writes into it: a CPU tensor the engine would let us
-- write in place (the same rules as t:copy_), with no elements sharing memory.
local function check_writable(t, fn)
  check.tensor(t, fn, "tensor")
  if t:device() ~= "cpu" then
    check.error(string.format("%s: only CPU tensors are supported, got a tensor on %s", fn, t:device()))
  end
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
-- contiguous copy that is then copied back (write = false: nothing to copy back).
local function on_buffer(t, fn, write, op)
  local c = t:is_contiguous() and t or t:contiguous()
  local ptr, n, dtype = core._raw_buffer(c, fn, write)
  op(ptr, n, dtype)   -- c (and t) stay referenced by this frame meanwhile
  if write and c ~= t then dle.no_grad(function() t:copy_(c) end) end
  return t
end

local OPS = {sum = "sum", mean = "mean", avg = "mean", max = "max", min = "min", prod = "prod"}

--- dist.all_reduce(t, op) -> t, reduced in place across every rank.
-- op: "sum" (default), "mean" (or "avg"; float dtypes: the sum divided by world_size()), "max",
-- "min", "prod". Every dtype: bool reduces with or (sum, max) and and (min, prod); integers wrap
-- on overflow; float16 and bfloat16 are combined pairwise in float32 and rounded back (MPI has no
-- 16-bit float type: user-defined MPI ops). A non-contiguous t is reduced through a contiguous copy.
function dist.all_reduce(t, op)
  local m = need("all_reduce")
  check_writable(t, "all_reduce")
  if op ~= nil and type(op) ~= "string" then
    check.error("all_reduce: op must be a string, got " .. check.typename(op))
  end
  local name = OPS[op or "sum"]
  if not name then
    check.error("all_reduce: unknown op '" .. op .. "' (expected sum, mean, avg, max, min or prod)")
  end
  if name == "mean" and not t:is_floating_point() then
    check.error("all_reduce: op '" .. op .. "' needs a floating-point tensor, got " .. t:dtype())
  end
  on_buffer(t, "all_reduce", true, function(ptr, n, dtype)
    m.all_reduce(ptr, n, dtype, name == "mean" and "sum" or name)
  end)
  if name == "mean" then
    local w = m.world_size()
    if w > 1 then dle.no_grad(function() t:div_(w) end) end
  end
  return t
end

--- dist.broadcast(t, root) -> t, holding root's values on every rank (in place).
-- root: the 0-based rank that sends (default 0); its own t is only read.
function dist.broadcast(t, root)
  local m = need("broadcast")
  root = root == nil and 0 or check.integer(root, "broadcast", "root")
  local size = m.world_size()
  if root < 0 or root >= size then
    check.error(string.format("broadcast: root %d is not a rank (ranks are 0..%d)", root, size - 1))
  end
  local sender = m.rank() == root
  if sender then
    check.tensor(t, "broadcast", "tensor")
    if t:device() ~= "cpu" then
      check.error("broadcast: only CPU tensors are supported, got a tensor on " .. t:device())
    end
  else
    check_writable(t, "broadcast")
  end
  return on_buffer(t, "broadcast", not sender, function(ptr, n, dtype) m.broadcast(ptr, n, dtype, root) end)
end

-- dist.DistributedDataParallel(model, opts) (lua/dle/dist/ddp.lua), loaded on first use: it needs
-- dle.nn, which scripts using only the collectives need not load.
setmetatable(dist, {__index = function(t, k)
  if k == "DistributedDataParallel" then
    local ddp = require "dle.dist.ddp"
    rawset(t, k, ddp)
    return ddp
  end
end})

check.export(dist)
return dist
