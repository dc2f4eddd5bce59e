--- dle.models.hf: Hugging Face checkpoint directories — config.json and the weights in
-- model.safetensors or shards listed by model.safetensors.index.json ("weight_map": tensor name ->
-- file), each file memory-mapped (dle.load_safetensors with {mmap = true}).
local dle = require("dle")
local check = require("dle.check")
local L = require("dle.models.layers")
local json = require("dle.io.json")

local H = {}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- A JSON file's object as Lua values (null -> nil); errors name fn and the file.
H.read_json = json.read_object

--- All tensors of the checkpoint in dir (name -> tensor, memory-mapped) and the file named in errors.
function H.weights(fn, dir)
  local single = dir .. "/model.safetensors"
  if exists(single) then return dle.load_safetensors(single, {mmap = true}), single end
  local index = dir .. "/model.safetensors.index.json"
  if not exists(index) then
    check.error(fn .. ": " .. dir .. " has neither model.safetensors nor model.safetensors.index.json")
  end
  local map = H.read_json(fn, index).weight_map
  if type(map) ~= "table" then check.error(fn .. ": " .. index .. ": no weight_map object") end
  local files, out = {}, {}
  for name, file in pairs(map) do
    if type(file) ~= "string" or file:find("/", 1, true) or file:find("^%.") then
      check.error(string.format("%s: %s: bad shard file name %s for %q", fn, index, tostring(file), name))
    end
    if not files[file] then files[file] = dle.load_safetensors(dir .. "/" .. file, {mmap = true}) end
    local t = files[file][name]
    if t == nil then check.error(string.format("%s: %s: tensor %q is not in %s", fn, index, name, file)) end
    out[name] = t
  end
  return out, index
end

-- A config table as JSON: numbers, strings, booleans and nested objects (rope_scaling), keys
-- sorted; keys starting with "_" are dle's own derived values and are left out.
local function config_json(c, indent)
  indent = indent or "  "
  local keys, parts = {}, {}
  for k, v in pairs(c) do
    local t = type(v)
    local kept = t == "number" or t == "string" or t == "boolean" or t == "table"
    if type(k) == "string" and k:sub(1, 1) ~= "_" and kept then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys)
  local function value(v)
    if type(v) == "table" and #v > 0 then -- an array (architectures, eos_token_id lists)
      local items = {}
      for j, x in ipairs(v) do items[j] = value(x) end
      return "[" .. table.concat(items, ", ") .. "]"
    end
    return type(v) == "table" and config_json(v, indent .. "  ")
      or type(v) == "string" and dle.io.json_string(v) or math.type(v) == "float" and string.format("%.17g", v)
      or tostring(v)
  end
  for i, k in ipairs(keys) do parts[i] = indent .. dle.io.json_string(k) .. ": " .. value(c[k]) end
  return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent:sub(3) .. "}"
end

--- Writes model (GPT2 or Llama) as a Hugging Face checkpoint directory: config.json and
-- model.safetensors with Hugging Face's names (0-based layer numbers; GPT-2's Conv1D weights
-- {in, out}; a tied head is not written twice). `conv1d` names the weights stored transposed.
function H.save(fn, model, dir, model_type, conv1d)
  check.string(dir, fn, "dir")
  if not os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'") then check.error(fn .. ": cannot create " .. dir) end
  local c = {model_type = model_type}
  for k, v in pairs(model.config) do c[k] = v end
  local f, err = io.open(dir .. "/config.json", "wb")
  if not f then check.error(fn .. ": cannot write " .. tostring(err)) end
  f:write(config_json(c), "\n")
  f:close()
  local tensors = {}
  for name, p in model:named_parameters() do
    local hf = name:gsub("%.(%d+)%.", function(i) return "." .. (tonumber(i) - 1) .. "." end)
    local last = hf:match("[^.]+%.[^.]+%.weight$") or ""
    tensors[hf] = (conv1d and conv1d[last]) and p:detach():t():contiguous() or p:detach()
  end
  dle.save_safetensors(dir .. "/model.safetensors", tensors)
end

--- Builds a model from dir: make(config, source) with the checkpoint's tensors (renamed by
-- rename(tensors) when given). The model is returned in eval mode; names the checkpoint held but
-- the architecture did not use are in model.unused_weights.
function H.build(fn, dir, opts, make, rename)
  check.string(dir, fn, "dir")
  check.options(opts, fn, {})
  local config = H.read_json(fn, dir .. "/config.json")
  local tensors, where = H.weights(fn, dir)
  if rename then tensors = rename(tensors) end
  local src = L.source(tensors, fn, where)
  local model = make(config, src)
  model:eval()
  model.unused_weights = src:unused()
  return model
end

return H
