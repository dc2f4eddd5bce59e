--- dle.dist.nccl: the transport of dle.dist's collectives on CUDA tensors, NCCL (the module
-- dle.dist_nccl, bindings/dist_nccl/, built when nvcc and nccl.h are found). lua/dle/dist/init.lua
-- checks the arguments as for CPU tensors, then calls the functions of M.transport(...) exactly as
-- it calls dle.dist_native's (same arguments: raw buffers from dle.core._raw_buffer), so both paths
-- share every check, the staging copy of a non-contiguous tensor and the division of "mean".
-- A group's communicator (the world's, or a new_group's) is made on its first collective on a CUDA
-- tensor, on that tensor's device: its rank 0 creates an ncclUniqueId, MPI broadcasts it over the
-- group, every rank calls ncclCommInitRank. Every rank of the group must therefore make that call
-- with a tensor on its device (a rank using a CPU tensor in the same call is undefined, as a shape
-- mismatch is). NCCL calls are enqueued on the device's legacy default stream, where every CUDA
-- kernel of dle runs: ordered with them, without a host synchronization.
local dle = require("dle")
local check = require("dle.check")
local core = dle.core

local M = {}

-- dle.dist_nccl, loaded on first use
local nccl = require("dle.optional_module")("dle.dist_nccl", "", "NCCL",
  "nvcc or nccl.h (/usr/local/cuda/include, or $NCCL_HOME/include) was missing when dle was built")

--- M.available() -> true, or false and the reason: whether dle.dist_nccl loads.
function M.available() return nccl.available() end

--- M.dtypes() -> {dle dtype name = NCCL type name}, the module's dtype map (nil and the reason
-- when it is not built).
function M.dtypes()
  local native, why = nccl.load()
  if not native then return nil, why end
  return native.dtypes()
end

-- The communicators: comms[group or WORLD][device index]. Weak keys: a collected group's
-- communicator goes with it (its __gc destroys it).
local WORLD = {}
local comms = setmetatable({}, {__mode = "k"})

-- The communicator of group g (nil: the world) on CUDA device `device`, made on first use (a
-- collective call of every rank of the group). m: dle.dist_native; native: dle.dist_nccl.
local function comm_for(m, native, g, device, fn)
  local per = comms[g or WORLD]
  if not per then
    per = {}
    comms[g or WORLD] = per
  end
  if per[device] then return per[device] end
  local gn = g and g._native
  if gn and not m.group_is_member(gn) then check.error(fn .. ": this rank is not a member of the group") end
  local rank = gn and m.group_rank(gn) or m.rank()
  local size = g and #g.ranks or m.world_size()
  local id = dle.zeros({native.unique_id_bytes}, {dtype = "uint8"})
  local ptr = core._raw_buffer(id, fn, true)
  if rank == 0 then native.unique_id(ptr, fn) end
  m.broadcast(ptr, native.unique_id_bytes, "uint8", 0, gn)
  per[device] = native.comm_init(ptr, size, rank, device, fn)
  return per[device]
end

--- M.transport(m, g, device, fn) -> a table of the functions of dle.dist_native that dle.dist's
-- collectives call (all_reduce, broadcast, all_gather, reduce_scatter, send, isend, recv), with the
-- same arguments, running through NCCL on group g's communicator on CUDA device `device` (an index).
-- An error naming fn when NCCL was not built.
function M.transport(m, g, device, fn)
  local native, why = nccl.load()
  if not native then check.error(fn .. ": a tensor on cuda:" .. device .. " needs NCCL: " .. why) end
  local c = comm_for(m, native, g, device, fn)
  local t = {}
  function t.all_reduce(ptr, n, dtype, op) native.all_reduce(c, ptr, n, dtype, op) end
  function t.broadcast(ptr, n, dtype, root) native.broadcast(c, ptr, n, dtype, root) end
  function t.all_gather(sp, n, dtype, rp) native.all_gather(c, sp, n, dtype, rp) end
  function t.reduce_scatter(sp, n, dtype, op, rp) native.reduce_scatter(c, sp, n, dtype, op, rp) end
  -- NCCL has no tags: messages between two ranks match in the order they were sent
  function t.send(ptr, n, dtype, dst) native.send(c, ptr, n, dtype, dst) end
  -- stream-ordered already: no request to wait for (a later write to the tensor queues after it)
  function t.isend(ptr, n, dtype, dst) native.send(c, ptr, n, dtype, dst) end
  function t.recv(ptr, n, dtype, src)
    if src < 0 then
      check.error(fn .. ": a CUDA tensor needs a src rank (NCCL cannot receive from any rank)")
    end
    native.recv(c, ptr, n, dtype, src)
    return src
  end
  return t
end

return M
