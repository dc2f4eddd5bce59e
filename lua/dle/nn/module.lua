--- dle.nn.Module: the base class of layers and models (Torch7/PyTorch style).
-- Subclass with `local Net = dle.nn.Module:extend("Net")`, define `Net:init(...)` and
-- `Net:forward(x)`, then `local net = Net(...)` and `net(x)`.
-- Fields assigned a leaf tensor that requires grad register as parameters, fields assigned a
-- Module register as submodules, and plain Lua lists of modules/parameters register their
-- elements ("layers.1.weight"); registration order is assignment order, so names and the
-- order of parameters() are deterministic. Buffers (state that is not trained, saved in
-- state_dict) are declared with `self:register_buffer(name, t)`.
local dle = require("dle")
local check = require("dle.check")

local Module = {}
Module.__name = "Module"

-- The function called with (module, inputs, output) after every module call while summary() runs.
local call_hook = nil

local function is_tensor(v) return dle.is_tensor(v) end

--- True when `v` is a Module instance (or class).
-- @param v any value
-- @return boolean
function Module.is_module(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return mt ~= nil and rawget(mt, "__dle_module") == true
end
local is_module = Module.is_module

-- A field value that is a plain list of modules or tensors (a ModuleList-like container).
local function is_list(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil or #v == 0 then return false end
  for _, e in ipairs(v) do
    if not (is_module(e) or is_tensor(e)) then return false end
  end
  return true
end

local function instance_mt(cls)
  local mt = rawget(cls, "_instance_mt")
  if mt then return mt end
  mt = {
    __index = cls,
    __dle_module = true,
    __name = "dle.nn." .. cls.__name,
    __newindex = function(self, k, v)
      if type(k) ~= "string" or k:sub(1, 1) ~= "_" then
        local seen = rawget(self, "_seen")
        if not seen[k] and (is_module(v) or is_tensor(v) or is_list(v)) then
          seen[k] = true
          local order = rawget(self, "_order")
          order[#order + 1] = k
          if is_tensor(v) and v.requires_grad and v.is_leaf then rawget(self, "_params")[k] = true end
        end
      end
      rawset(self, k, v)
    end,
    -- every result of forward is returned (an LSTM's output and state, an imported ONNX graph's
    -- outputs); summary()'s hook sees the first
    __call = check.public(function(self, ...)
      local pre, post = rawget(self, "_forward_pre_hooks"), rawget(self, "_forward_hooks")
      if pre or post then return Module._call_hooked(self, pre, post, ...) end
      local out = table.pack(self:forward(...))
      if call_hook then call_hook(self, {...}, out[1]) end
      return table.unpack(out, 1, out.n)
    end),
    __tostring = function(self) return self:__repr() end,
  }
  rawset(cls, "_instance_mt", mt)
  return mt
end

-- A call with forward hooks: the pre-hooks may replace the arguments, the hooks the first result.
function Module._call_hooked(self, pre, post, ...)
  local args = table.pack(...)
  for _, h in ipairs(pre or {}) do
    local r = h.fn(self, args)
    if r ~= nil then
      if type(r) ~= "table" then
        check.error(string.format("%s: a forward pre-hook returned a %s; it returns nil or a list of the arguments",
          self.__name, check.typename(r)))
      end
      args = r
      args.n = args.n or #r
    end
  end
  local out = table.pack(self:forward(table.unpack(args, 1, args.n)))
  for _, h in ipairs(post or {}) do
    local r = h.fn(self, args, out[1])
    if r ~= nil then out[1] = r end
  end
  if call_hook then call_hook(self, args, out[1]) end
  return table.unpack(out, 1, out.n)
end

local HookHandle = {}
HookHandle.__index = HookHandle
HookHandle.__name = "dle.nn.HookHandle"
--- handle:remove(): the hook runs no more (removing twice is harmless).
function HookHandle:remove()
  local list = rawget(self.module, self.field)
  for i, h in ipairs(list or {}) do
    if h == self then table.remove(list, i) break end
  end
  if list and #list == 0 then rawset(self.module, self.field, nil) end
end

local function add_hook(self, field, fn, what)
  check.callable(fn, self.__name .. ":" .. what, "fn")
  local list = rawget(self, field) or {}
  rawset(self, field, list)
  local h = setmetatable({fn = fn, module = self, field = field}, HookHandle)
  list[#list + 1] = h
  return h
end

--- m:register_forward_pre_hook(fn) -> handle: fn(m, args) runs before each call of m's forward,
-- args being the call's arguments as a table.pack list; it may return a new list of arguments
-- (args.n, or its length, is their count), or nil to keep them. PyTorch's; handle:remove() ends it.
function Module:register_forward_pre_hook(fn)
  return add_hook(self, "_forward_pre_hooks", fn, "register_forward_pre_hook")
end

--- m:register_forward_hook(fn) -> handle: fn(m, args, output) runs after each call of m's forward
-- (output: its first result); a non-nil return replaces that result. PyTorch's.
function Module:register_forward_hook(fn)
  return add_hook(self, "_forward_hooks", fn, "register_forward_hook")
end

local class_mt = {
  __call = check.public(function(cls, ...) return cls:new(...) end),
  __tostring = function(cls) return "dle.nn." .. cls.__name .. " (class)" end,
}
-- dle.nn.Module() itself makes an empty container module, as PyTorch's nn.Module() does.
setmetatable(Module, class_mt)

--- Makes a subclass.
-- @param name class name (used in messages, printing and summary())
-- @return the new class table; call it to make instances
function Module:extend(name)
  if type(name) ~= "string" then check.error("Module:extend: expected a class name (string), got " .. type(name)) end
  local cls = {__name = name, super = self}
  return setmetatable(cls, {__index = self, __call = class_mt.__call, __tostring = class_mt.__tostring})
end

--- Makes an instance and runs its init(...) (what calling the class does).
-- @return the new module
function Module:new(...)
  local obj = {_order = {}, _seen = {}, _params = {}, _buffers = {}, training = true}
  setmetatable(obj, instance_mt(self))
  obj:init(...)
  return obj
end

--- Default initializer: no parameters.
function Module:init() end

--- The computation; subclasses override it.
function Module:forward()
  check.error(self.__name .. ": this module has no forward method (define " .. self.__name .. ":forward)")
end

--- Registers `t` (a tensor, or nil) as a buffer: saved in state_dict, converted by to(), not trained.
-- @param name field name
-- @param t tensor or nil
function Module:register_buffer(name, t)
  check.string(name, self.__name .. ":register_buffer", "name")
  if t ~= nil and not is_tensor(t) then
    check.error(self.__name .. ":register_buffer: '" .. name .. "' must be a tensor")
  end
  local seen, order = rawget(self, "_seen"), rawget(self, "_order")
  if not seen[name] then seen[name] = true; order[#order + 1] = name end
  rawget(self, "_buffers")[name] = true
  rawset(self, name, t)
end

--- Registers `t` as a parameter under `name` (also for tensors that do not require grad: frozen).
-- @param name field name
-- @param t tensor
function Module:register_parameter(name, t)
  if not is_tensor(t) then check.error(self.__name .. ":register_parameter: '" .. name .. "' must be a tensor") end
  local seen, order = rawget(self, "_seen"), rawget(self, "_order")
  if not seen[name] then seen[name] = true; order[#order + 1] = name end
  rawget(self, "_params")[name] = true
  rawset(self, name, t)
end

-- What kind of registered field `k` currently holds: "module", "param", "buffer", "list" or nil.
local function kind(self, k)
  local v = rawget(self, k)
  if v == nil then return nil end
  if is_module(v) then return "module" end
  if is_tensor(v) then
    if rawget(self, "_buffers")[k] then return "buffer" end
    if rawget(self, "_params")[k] or (v.requires_grad and v.is_leaf) then return "param" end
    return nil
  end
  if is_list(v) then return "list" end
  return nil
end

-- Visits (name, value, kind) of this module's own registered entries, lists expanded.
local function own_entries(self, fn)
  for _, k in ipairs(rawget(self, "_order")) do
    local kd = kind(self, k)
    if kd == "list" then
      for i, e in ipairs(rawget(self, k)) do
        local name = tostring(k) .. "." .. i
        if is_module(e) then fn(name, e, "module")
        elseif e.requires_grad then fn(name, e, "param") end
      end
    elseif kd then
      fn(tostring(k), rawget(self, k), kd)
    end
  end
end

-- An ordered list of {name, value} pairs that also iterates as `for name, v in list do`.
local pairs_mt = {
  __call = function(self, _, prev)
    local i = prev == nil and 1 or self.__pos[prev] + 1
    local e = self[i]
    if e then return e[1], e[2] end
    return nil
  end,
}
local function named_list(entries)
  local pos = {}
  for i, e in ipairs(entries) do pos[e[1]] = i end
  entries.__pos = pos
  return setmetatable(entries, pairs_mt)
end

--- Named submodules, depth first, self first (name ""), each module once.
-- @param prefix optional name prefix
-- @return ordered list of {name, module}; also usable as `for name, m in net:named_modules() do`
function Module:named_modules(prefix)
  local out, seen = {}, {}
  local function walk(m, name)
    if seen[m] then return end
    seen[m] = true
    out[#out + 1] = {name, m}
    own_entries(m, function(n, v, kd)
      if kd == "module" then walk(v, name == "" and n or (name .. "." .. n)) end
    end)
  end
  walk(self, prefix or "")
  return named_list(out)
end

--- All modules (self first, then submodules depth first), each once.
-- @return list of modules
function Module:modules()
  local out = {}
  for _, e in ipairs(self:named_modules()) do out[#out + 1] = e[2] end
  return out
end

--- Direct submodules in registration order.
-- @return list of modules
function Module:children()
  local out = {}
  own_entries(self, function(_, v, kd) if kd == "module" then out[#out + 1] = v end end)
  return out
end

-- Named entries of a kind ("param" or "buffer") of the whole tree, depth first in registration
-- order (a module's entries come where the module was assigned); shared tensors appear once.
local function named_of_kind(self, want)
  local out, seen_t, seen_m = {}, {}, {}
  local function walk(m, prefix)
    if seen_m[m] then return end
    seen_m[m] = true
    own_entries(m, function(n, v, kd)
      local name = prefix == "" and n or (prefix .. "." .. n)
      if kd == "module" then
        walk(v, name)
      elseif kd == want and not seen_t[v] then
        seen_t[v] = true
        out[#out + 1] = {name, v}
      end
    end)
  end
  walk(self, "")
  return out
end

--- Parameters with their dotted names ("fc1.weight"), in registration order.
-- @return ordered list of {name, tensor}; also usable as `for name, p in net:named_parameters() do`
function Module:named_parameters()
  return named_list(named_of_kind(self, "param"))
end

--- Parameters in registration order (what optimizers take).
-- @return list of tensors
function Module:parameters()
  local out = {}
  for _, e in ipairs(named_of_kind(self, "param")) do out[#out + 1] = e[2] end
  return out
end

--- Buffers with their dotted names.
-- @return ordered list of {name, tensor}
function Module:named_buffers()
  return named_list(named_of_kind(self, "buffer"))
end

--- Number of parameter elements.
-- @return integer
function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

--- Calls fn(m) on every module (children first, then self).
-- @return self
function Module:apply(fn)
  check.callable(fn, self.__name .. ":apply", "fn")
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

--- Sets training mode on this module and all submodules.
-- @param mode boolean (default true)
-- @return self
function Module:train(mode)
  if mode == nil then mode = true end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode and true or false) end
  return self
end

--- Sets evaluation mode (train(false)).
-- @return self
function Module:eval() return self:train(false) end

--- Clears gradients: sets every parameter's .grad to nil (or, with {set_to_none = false},
-- fills existing gradients with zeros).
-- @param opts optional {set_to_none = true}
function Module:zero_grad(opts)
  if opts ~= nil then check.options(opts, self.__name .. ":zero_grad", {"set_to_none"}) end
  local to_none = not (opts and opts.set_to_none == false)
  require("dle.graph.train").zero_grad(self:parameters(), to_none)
end

--- Parameters and buffers by dotted name (tensors share storage with the module's, detached).
-- @return table name -> tensor
function Module:state_dict()
  local sd = {}
  for _, e in ipairs(named_of_kind(self, "param")) do sd[e[1]] = e[2]:detach() end
  for _, e in ipairs(named_of_kind(self, "buffer")) do sd[e[1]] = e[2]:detach() end
  return sd
end

local shape_str = require("dle.check").shape_str

--- Copies tensors from `sd` (name -> tensor) into parameters and buffers.
-- Missing and unexpected keys, shape and dtype mismatches are errors (with {strict = false},
-- missing/unexpected keys are skipped and returned).
-- @param sd table name -> tensor
-- @param opts optional {strict = true}
-- @return list of missing keys, list of unexpected keys
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then check.error("load_state_dict: expected a table name -> tensor, got " .. type(sd)) end
  opts = check.options(opts, "load_state_dict", {"strict"})
  local strict = not (opts and opts.strict == false)
  local targets, names = {}, {}
  for _, want in ipairs({"param", "buffer"}) do
    for _, e in ipairs(named_of_kind(self, want)) do targets[e[1]] = e[2]; names[#names + 1] = e[1] end
  end
  local missing, unexpected = {}, {}
  for _, n in ipairs(names) do if sd[n] == nil then missing[#missing + 1] = n end end
  for k in pairs(sd) do if targets[k] == nil then unexpected[#unexpected + 1] = tostring(k) end end
  table.sort(unexpected)
  if strict and (#missing > 0 or #unexpected > 0) then
    local parts = {}
    if #missing > 0 then parts[#parts + 1] = "missing keys: " .. table.concat(missing, ", ") end
    if #unexpected > 0 then parts[#parts + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
    check.error("load_state_dict: " .. table.concat(parts, "; "))
  end
  for _, n in ipairs(names) do
    local src, dst = sd[n], targets[n]
    if src ~= nil then
      if not is_tensor(src) then
        check.error("load_state_dict: '" .. n .. "' is a " .. type(src) .. ", expected a tensor")
      end
      if shape_str(src) ~= shape_str(dst) then
        check.error("load_state_dict: '" .. n .. "' has shape " .. shape_str(src) .. ", expected " .. shape_str(dst))
      end
      if src:dtype() ~= dst:dtype() then
        check.error("load_state_dict: '" .. n .. "' has dtype " .. src:dtype() .. ", expected " .. dst:dtype())
      end
    end
  end
  dle.no_grad(function()
    for _, n in ipairs(names) do
      if sd[n] ~= nil then targets[n]:copy_(sd[n]) end
    end
  end)
  return missing, unexpected
end

--- Converts parameters and buffers to a dtype or device, replacing the module's fields
-- (parameters stay leaves that require grad). Non-float dtypes are refused for parameters.
-- @param dtype_or_device e.g. "float64", "cpu"
-- @return self
function Module:to(target)
  if type(target) ~= "string" then check.error("Module:to: expected a dtype or device string, got " .. type(target)) end
  local non_float = {int32 = true, int64 = true, uint8 = true, bool = true}
  if non_float[target] and #self:parameters() > 0 then
    check.error("Module:to: cannot convert parameters to " .. target .. " (not a float dtype)")
  end
  for _, m in ipairs(self:modules()) do
    -- a no-op conversion keeps the very same tensor (optimizers holding it stay valid)
    local function convert(t)
      local c = t:detach():to(target)
      if dle.same_storage(c, t) then return t end
      return c
    end
    for _, k in ipairs(rawget(m, "_order")) do
      local kd = kind(m, k)
      local v = rawget(m, k)
      if kd == "param" then
        local rg = v.requires_grad
        local c = convert(v)
        if rg and c ~= v then
          if not c:is_floating_point() then
            check.error("Module:to: cannot convert parameter '" .. tostring(k) .. "' to " .. target
                        .. " (not a float dtype)")
          end
          c:requires_grad_(true)
        end
        rawset(m, k, c)
      elseif kd == "buffer" then
        rawset(m, k, convert(v))
      elseif kd == "list" then
        for i, e in ipairs(v) do
          if is_tensor(e) and e.requires_grad then
            local c = convert(e)
            v[i] = c == e and e or c:requires_grad_(true)
          end
        end
      end
    end
  end
  return self
end

--- to("float64"): parameters and buffers to float64.
-- @return self
function Module:double() return self:to("float64") end

--- to("float32"): parameters and buffers to float32.
-- @return self
function Module:float() return self:to("float32") end

--- to("float16"): parameters and buffers to float16.
-- @return self
function Module:half() return self:to("float16") end

--- to("bfloat16"): parameters and buffers to bfloat16.
-- @return self
function Module:bfloat16() return self:to("bfloat16") end

--- to("cuda"): parameters and buffers to the GPU.
-- @return self
function Module:cuda() return self:to("cuda") end

--- to("cpu"): parameters and buffers to the CPU.
-- @return self
function Module:cpu() return self:to("cpu") end

--- Forward FLOPs of one call of this module given its inputs and output (summary() uses it);
-- layers built on matmul override it (2*m*n*k per matmul); the default is 0.
-- @return number
function Module:flops() return 0 end

--- Extra text shown after the class name when printing (e.g. "in=784, out=256").
-- @return string
function Module:extra_repr() return "" end

--- Printable tree of the module.
-- @return string
function Module:__repr()
  local head = self.__name .. "(" .. self:extra_repr()
  local lines = {}
  own_entries(self, function(n, v, kd)
    if kd == "module" then
      local sub = v:__repr():gsub("\n", "\n  ")
      lines[#lines + 1] = "  (" .. n .. "): " .. sub
    end
  end)
  if #lines == 0 then return head .. ")" end
  return head .. "\n" .. table.concat(lines, "\n") .. "\n)"
end

local function shape_of(out)
  if is_tensor(out) then return out:shape() end
  return {}
end

local function fmt_shape(s) return "{" .. table.concat(s, ",") .. "}" end

local function fmt_int(n)
  local s = tostring(math.tointeger(n) or n)
  local r = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (r:gsub("^,", ""))
end

--- Runs a forward pass on zeros of `input_shape` under no_grad and reports, per leaf layer
-- (a module without submodules) in call order: name, type, output shape, parameter count,
-- forward FLOPs (2*m*n*k per matmul) and activation memory (bytes of the output).
-- @param input_shape table of sizes, batch dimension included, e.g. {1, 784}
-- @param opts optional {dtype = "float32", print = true}
-- @return table {layers = {{name, type, output_shape, params, flops, memory}, ...},
--   total_params, trainable_params, total_flops, total_memory}
function Module:summary(input_shape, opts)
  opts = check.options(opts, self.__name .. ":summary", {"dtype", "print"})
  if type(input_shape) ~= "table" then check.error("summary: expected an input shape table, e.g. {1, 784}") end
  local names = {}
  for _, e in ipairs(self:named_modules()) do names[e[2]] = e[1] end
  local layers = {}
  local prev = call_hook
  call_hook = function(m, inputs, out)
    if #m:children() > 0 and m ~= self then return end
    if m == self and #layers > 0 then return end
    local own = 0
    own_entries(m, function(_, v, kd) if kd == "param" then own = own + v:numel() end end)
    local mem = is_tensor(out) and out:numel() * out:element_size() or 0
    layers[#layers + 1] = {
      name = names[m] ~= "" and names[m] or "(self)", type = m.__name, output_shape = shape_of(out),
      params = own, flops = m:flops(inputs, out), memory = mem,
    }
  end
  local ok, err = pcall(dle.no_grad, function()
    local x = dle.zeros(input_shape, {dtype = opts.dtype or "float32"})
    self(x)
  end)
  call_hook = prev
  if not ok then error(err, 0) end
  local res = {layers = layers, total_params = 0, trainable_params = 0, total_flops = 0, total_memory = 0}
  for _, p in ipairs(self:parameters()) do
    res.total_params = res.total_params + p:numel()
    if p.requires_grad then res.trainable_params = res.trainable_params + p:numel() end
  end
  for _, l in ipairs(layers) do
    res.total_flops = res.total_flops + l.flops
    res.total_memory = res.total_memory + l.memory
  end
  if opts.print ~= false then
    local rows = {string.format("%-20s %-14s %-18s %12s %14s %12s", "Layer", "Type", "Output shape", "Params", "FLOPs",
                                "Memory (B)")}
    rows[#rows + 1] = string.rep("-", #rows[1])
    for _, l in ipairs(layers) do
      rows[#rows + 1] = string.format("%-20s %-14s %-18s %12s %14s %12s", l.name, l.type, fmt_shape(l.output_shape),
        fmt_int(l.params), fmt_int(l.flops), fmt_int(l.memory))
    end
    rows[#rows + 1] = string.rep("-", #rows[1])
    rows[#rows + 1] = "Total params: " .. fmt_int(res.total_params) .. " (trainable " .. fmt_int(res.trainable_params)
        .. ")"
    rows[#rows + 1] = "Forward FLOPs: " .. fmt_int(res.total_flops)
    rows[#rows + 1] = "Activation memory: " .. fmt_int(res.total_memory) .. " bytes"
    print(table.concat(rows, "\n"))
  end
  return res
end

return Module
