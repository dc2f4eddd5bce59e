--- dle.graph.save / dle.graph.load: a captured graph in one self-describing file, with its
-- constants and parameters; engine/graph_file.c reads the same file and runs it from C. The
-- layout (docs/file_formats.md, "Graph files"), little-endian:
--   "DLEGRAPH" u32 version (1) u32 #tensors u32 #nodes u32 #outputs u64 data_start
--   tensors: str dtype, u8 ndim, i64 sizes[ndim], u64 offset (from data_start), u8 requires_grad
--   nodes, each reading only earlier nodes:
--     u8 1 input: u32 position (1-based), str dtype, u8 ndim, i64 sizes[ndim]
--     u8 2 constant: u32 tensor (0-based)
--     u8 3 op: str op name, u8 flags (1 in place into input 1, 2 fills a new tensor, 4 no_grad),
--        u8 #inputs, u32 inputs[], attrs (u8 #ints, i64 ints[], f64 f[2], str dtype ("" none),
--        u8 keepdim, i64 index_base), str result dtype, u8 ndim, i64 sizes[ndim]
--     u8 4 result k of a multi-result op: u32 node, u8 k (1-based)
--     u8 5 detach: u32 node
--   outputs: u32 node[#outputs]; then, from data_start (64-byte aligned), the tensors' bytes
--   (dle_serialize_write's raw little-endian C-order elements).
-- str = u16 length + bytes. Ops are names looked up in the op table: a file never holds code.
-- Fused nodes are written as the ops they stand for (a loaded graph can be fused again by
-- dle.compile or dle.rewrite); control-flow nodes (cond, while_loop, scan) cannot be saved yet.
local core = require("dle.core")
local check = require("dle.check")
local Nodes = require("dle.graph.node")
local atomic = require("dle.io.atomic")

local M = {}
local MAGIC, VERSION = "DLEGRAPH", 1
local op_names = {}
for name, id in pairs(Nodes.op_ids) do op_names[id] = name end

local function str(s) return string.pack("<s2", s) end
local function shape(sizes)
  local parts = {string.pack("<B", #sizes)}
  for _, s in ipairs(sizes) do parts[#parts + 1] = string.pack("<i8", s) end
  return table.concat(parts)
end

-- The records of g: nodes in order (fused nodes expanded into their ops), tensors, outputs.
local function records(g, fn)
  local recs, index, tensors, tindex = {}, {}, {}, {}
  local function add(rec) recs[#recs + 1] = rec; return #recs - 1 end
  local function tensor(t)
    if not tindex[t] then
      tensors[#tensors + 1] = t
      tindex[t] = #tensors - 1
    end
    return tindex[t]
  end
  local function op_record(name, ins, attrs, flags, dtype, sizes)
    attrs = attrs or {}
    local ints = attrs.ints or {}
    local parts = {string.pack("<B", 3), str(name), string.pack("<BB", flags, #ins)}
    for _, i in ipairs(ins) do parts[#parts + 1] = string.pack("<I4", i) end
    parts[#parts + 1] = string.pack("<B", #ints)
    for _, v in ipairs(ints) do parts[#parts + 1] = string.pack("<i8", v) end
    local f = attrs.f or {}
    parts[#parts + 1] = string.pack("<dd", f[1] or 0, f[2] or 0)
    parts[#parts + 1] = str(attrs.dtype or "")
    parts[#parts + 1] = string.pack("<Bi8", attrs.keepdim and 1 or 0, attrs.index_base or 0)
    parts[#parts + 1] = str(dtype) .. shape(sizes)
    return add(table.concat(parts))
  end
  for _, n in ipairs(g:nodes()) do
    local op = n.op
    if op == "input" then
      index[n] = add(string.pack("<BI4", 1, n.attrs.index) .. str(n._dtype) .. shape(n._shape))
    elseif op == "const" or op == "param" then
      index[n] = add(string.pack("<BI4", 2, tensor(n:value())))
    elseif op == "output" then
      index[n] = add(string.pack("<BI4B", 4, index[n.inputs[1]], n.attrs.index))
    elseif op == "detach" then
      index[n] = add(string.pack("<BI4", 5, index[n.inputs[1]]))
    elseif op == "fused" then
      local regs = {}
      for k, u in ipairs(n.inputs) do regs[k] = index[u] end
      local nin, last = #n.inputs, nil
      for k, st in ipairs(n.steps) do
        local ins = {regs[st[3]]}
        if st[4] then ins[2] = regs[st[4]] end
        local final = k == #n.steps and not n.reduce
        last = op_record(op_names[st[1]], ins, st[2], n.no_grad and 4 or 0, n._dtype,
                         final and n._shape or (n.reduce and n.reduce.shape or n._shape))
        regs[nin + k] = last
      end
      if n.reduce then
        last = op_record(op_names[n.reduce.op], {last}, n.reduce.attrs, n.no_grad and 4 or 0, n._dtype, n._shape)
      end
      index[n] = last
    elseif n.subgraphs then
      check.error(string.format("%s: %s nodes (control flow) cannot be saved yet", fn, op))
    else
      local name = op_names[n.op_id or Nodes.op_ids[op]]
      if not name then check.error(string.format("%s: node %s is not an op of the table", fn, op)) end
      local ins = {}
      for k, u in ipairs(n.inputs) do ins[k] = index[u] end
      local flags = (n.inplace and 1 or 0) | (n.fresh and 2 or 0) | (n.no_grad and 4 or 0)
      if n.attrs.generator then
        check.error(string.format("%s: node %s draws from a generator of its own, which a file cannot hold", fn, op))
      end
      index[n] = op_record(name, ins, n.attrs, flags, n._dtype, n._shape)
    end
  end
  local outs = {}
  for k, n in ipairs(g.outputs) do outs[k] = index[n] end
  return recs, tensors, outs
end

--- dle.graph.save(path, g): writes g (a trace, a compiled or frozen graph, a symbolic one) to
-- path atomically. Results that are not tensors are not kept: a loaded graph returns its tensor
-- results in order.
function M.save(path, g)
  local fn = "dle.graph.save"
  if type(g) ~= "table" or type(g.nodes) ~= "function" then
    check.error(fn .. ": expected a graph, got " .. check.typename(g))
  end
  local recs, tensors, outs = records(g, fn)
  local node_part = table.concat(recs)
  local out_part = {}
  for k, o in ipairs(outs) do out_part[k] = string.pack("<I4", o) end
  out_part = table.concat(out_part)
  -- each tensor record is its dtype, shape, offset and flag: its length does not depend on the offset
  local tensor_len = 0
  for _, t in ipairs(tensors) do tensor_len = tensor_len + 2 + #t:dtype() + 1 + 8 * t:dim() + 8 + 1 end
  local data_start = 8 + 4 * 4 + 8 + tensor_len + #node_part + #out_part
  data_start = (data_start + 63) // 64 * 64
  -- tensor offsets, now that the data start is known
  local offsets, at = {}, 0
  for i, t in ipairs(tensors) do
    offsets[i] = at
    at = at + (t:numel() * t:element_size() + 63) // 64 * 64
  end
  local body = {}
  for i, t in ipairs(tensors) do
    body[i] = str(t:dtype()) .. shape(t:shape()) .. string.pack("<I8B", offsets[i], t.requires_grad and 1 or 0)
  end
  local tensor_part = table.concat(body)
  assert(#tensor_part == tensor_len)
  atomic.write(fn, path, function(f)
    f:write(MAGIC, string.pack("<I4I4I4I4I8", VERSION, #tensors, #recs, #outs, data_start))
    f:write(tensor_part, node_part, out_part)
    f:write(string.rep("\0", data_start - f:seek()))
    for i, t in ipairs(tensors) do
      f:seek("set", data_start + offsets[i])
      core._io_write(f, t:detach(), fn .. ": " .. path)
    end
    -- the file ends at the last tensor's padded end
    local size = data_start + at
    if f:seek("end") < size then f:seek("set", size - 1); f:write("\0") end
  end)
end

--- dle.graph.load(path) -> the graph a save wrote: inputs, constants (parameters again requiring
-- grad), ops, outputs; g:run(inputs...) returns the tensor results in order.
function M.load(path)
  local fn = "dle.graph.load"
  check.string(path, fn, "path")
  local f, err = io.open(path, "rb")
  if not f then check.error(fn .. ": cannot open " .. tostring(err)) end
  local ok, res = pcall(function()
    local size = core._io_file_size(f, fn .. ": " .. path)
    local head = f:read(math.min(size, 64 * 1024 * 1024)) or ""
    local function u(fmt, at) local v = string.unpack(fmt, head, at); return v end
    if #head < 32 or head:sub(1, 8) ~= MAGIC then check.error(fn .. ": " .. path .. " is not a dle graph file") end
    local version = u("<I4", 9)
    if version ~= VERSION then
      check.error(string.format("%s: %s: version %d (this dle reads %d)", fn, path, version, VERSION))
    end
    local ntensors, nnodes, nouts, data_start = u("<I4", 13), u("<I4", 17), u("<I4", 21), u("<I8", 25)
    if data_start > size or data_start > #head then
      check.error(fn .. ": " .. path .. ": data start beyond the file")
    end
    local meta = head:sub(1, data_start)
    local r = {pos = 33}
    function r.fail(what) check.error(string.format("%s: %s: %s at byte %d", fn, path, what, r.pos - 1)) end
    local function get(fmt, what)
      local ok2, v, nxt = pcall(string.unpack, fmt, meta, r.pos)
      if not ok2 then r.fail("truncated " .. what) end
      r.pos = nxt
      return v
    end
    local DTYPES = {float32 = true, float64 = true, float16 = true, bfloat16 = true, int32 = true, int64 = true,
                    uint8 = true, bool = true}
    local function get_dtype(what)
      local d = get("<s2", what)
      if not DTYPES[d] then r.fail(what .. " '" .. d .. "'") end
      return d
    end
    local function get_shape(what)
      local nd = get("<B", what)
      if nd > 8 then r.fail(what .. " with " .. nd .. " dims") end
      local s = {}
      for d = 1, nd do
        s[d] = get("<i8", what)
        if s[d] < 0 then r.fail(what .. " with a negative size") end
      end
      return s
    end
    local tensors = {}
    for i = 1, ntensors do
      local dtype = get_dtype("tensor dtype")
      local s = get_shape("tensor shape")
      local off = get("<I8", "tensor offset")
      local rg = get("<B", "tensor flag")
      if data_start + off > size then r.fail("tensor " .. i .. " data beyond the end of the file") end
      local t = core._io_read(f, data_start + off, dtype, s, false, fn .. ": " .. path)
      if rg == 1 then t:requires_grad_() end
      tensors[i - 1] = t
    end
    local Graph = require("dle.graph")
    local g = Graph.new()
    local nodes = {}
    local function node_at(i, what)
      local n = nodes[i]
      if not n then r.fail(what .. " refers to node " .. i .. ", not an earlier one") end
      return n
    end
    for i = 0, nnodes - 1 do
      local kind = get("<B", "node kind")
      local n
      if kind == 1 then
        local pos = get("<I4", "input position")
        local dtype = get_dtype("input dtype")
        n = Nodes.new("input", {}, {index = pos}, get_shape("input shape"), dtype)
        n.device = "cpu"
        if pos < 1 or pos > 64 or g.inputs[pos] then r.fail("input position " .. pos) end
        g.inputs[pos] = n
      elseif kind == 2 then
        local t = tensors[get("<I4", "constant tensor")]
        if not t then r.fail("a constant refers to a missing tensor") end
        n = Nodes.leaf(t)
      elseif kind == 3 then
        local name = get("<s2", "op name")
        local id = Nodes.op_ids[name]
        if not id then r.fail("unknown op '" .. name .. "'") end
        local flags, nin = get("<B", "op flags"), get("<B", "op inputs")
        local ins = {}
        for k = 1, nin do ins[k] = node_at(get("<I4", "op input"), "op " .. name) end
        local attrs, nints = {}, get("<B", "attr count")
        if nints > 10 then r.fail("op " .. name .. " with " .. nints .. " int attrs") end
        if nints > 0 then
          attrs.ints = {}
          for k = 1, nints do attrs.ints[k] = get("<i8", "int attr") end
        end
        local f1, f2 = get("<d", "float attr"), get("<d", "float attr")
        if f1 ~= 0 or f2 ~= 0 then attrs.f = {f1, f2} end
        local adt = get("<s2", "dtype attr")
        if adt ~= "" then
          if not DTYPES[adt] then r.fail("dtype attr '" .. adt .. "'") end
          attrs.dtype = adt
        end
        if get("<B", "keepdim") == 1 then attrs.keepdim = true end
        local base = get("<i8", "index base")
        if base ~= 0 then attrs.index_base = base end
        local dtype = get_dtype("result dtype")
        n = Nodes.new(name, ins, attrs, get_shape("result shape"), dtype)
        n.op_id = id
        if flags & 1 ~= 0 then n.inplace = true; g.effects[#g.effects + 1] = n end
        if flags & 2 ~= 0 then n.fresh = true end
        if flags & 4 ~= 0 then n.no_grad = true end
        if name == "rand" or name == "randn" or name == "randint" or name == "dropout" then
          g.effects[#g.effects + 1] = n
        end
        local ok3, why = pcall(core._graph_attrs, attrs)
        if not ok3 then r.fail("op " .. name .. ": " .. tostring(why)) end
      elseif kind == 4 then
        local src = node_at(get("<I4", "result source"), "a result")
        local k = get("<B", "result index")
        n = Nodes.new("output", {src}, {index = k}, src._shape, src._dtype)
      elseif kind == 5 then
        local src = node_at(get("<I4", "detach source"), "detach")
        n = Nodes.new("detach", {src}, {}, src._shape, src._dtype)
      else
        r.fail("unknown node kind " .. kind)
      end
      nodes[i] = n
      g._order[#g._order + 1] = n
    end
    for k = 1, #g.inputs do if not g.inputs[k] then r.fail("input " .. k .. " is missing") end end
    local items = {}
    for k = 1, nouts do
      g.outputs[k] = node_at(get("<I4", "output"), "output " .. k)
      items[k] = {node = true}
    end
    g.template = {n = nouts, items = items}
    return g
  end)
  f:close()
  if not ok then error(res, 0) end
  return res
end

return M
