--- What tests/dist_spec.lua and its MPI workers (tests/dist/*.lua, run under mpirun) share: the
-- rank-dependent data the collectives reduce, and the line format workers report in:
--   rank=<r> <key>=<comma-separated values>
local common = {}

common.DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool", "int8", "int16",
  "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"}
common.FLOATS = {float32 = true, float64 = true, float16 = true, bfloat16 = true, float8_e4m3fn = true,
  float8_e5m2 = true}
local UNSIGNED = {uint8 = true, uint16 = true, uint32 = true, uint64 = true}
local FLOAT8 = {float8_e4m3fn = true, float8_e5m2 = true}

--- The 6 values rank r contributes to an all_reduce of dtype dt: small integers (exact in every
-- dtype, products included: float8 values stay in -1..2, where float8 is exact), different on
-- each rank so that max and min take from both.
function common.values(dt, r)
  if dt == "bool" then
    return r == 0 and {true, true, false, false, true, false} or {true, false, true, false, false, true}
  end
  local v = {}
  local span = FLOAT8[dt] and 4 or 7
  for i = 1, 6 do v[i] = ((i * (r + 2)) + 3 * r) % span + (UNSIGNED[dt] and 0 or -1) end
  return v
end

--- The reduction of lists of values (one per rank) under op, elementwise, as Lua numbers.
function common.reduce(lists, op, dt)
  local out = {}
  for i = 1, #lists[1] do
    local acc = lists[1][i]
    for k = 2, #lists do
      local v = lists[k][i]
      if dt == "bool" then
        if op == "sum" or op == "max" then acc = acc or v else acc = acc and v end
      elseif op == "sum" or op == "mean" then acc = acc + v
      elseif op == "prod" then acc = acc * v
      elseif op == "max" then acc = math.max(acc, v)
      else acc = math.min(acc, v) end
    end
    if op == "mean" then acc = acc / #lists end
    out[i] = acc
  end
  return out
end

--- The model the DDP and ZeRO workers train, initialised from seed.
function common.mlp(seed)
  local dle = require("dle")
  dle.manual_seed(seed)
  return dle.nn.Sequential(dle.nn.Linear(5, 8), dle.nn.Tanh(), dle.nn.Linear(8, 3))
end

--- The workers' training data: the global batch X, Y (8 samples, the same on every rank) and rank's
-- share of it, rows rank*B+1 .. (rank+1)*B with B = 8 / world.
-- @return X, Y, x_rank, y_rank, B
function common.batch(rank, world)
  local dle = require("dle")
  dle.manual_seed(100)
  local X, Y = dle.randn(8, 5), dle.randint(1, 4, {8})
  local B = 8 // world
  return X, Y, X:narrow(1, rank * B + 1, B), Y:narrow(1, rank * B + 1, B), B
end

--- The Adam options the ZeRO workers train with.
common.ADAM = {lr = 0.05, betas = {0.8, 0.99}, weight_decay = 0.01}

--- One step of cross-entropy training of model with opt on (x, y), the PyTorch way.
function common.train_step(model, opt, x, y)
  local dle = require("dle")
  local loss = dle.nn.functional.cross_entropy(model(x), y)
  opt:zero_grad(); loss:backward(); opt:step()
end

-- A tensor's dtype, shape and values, as a plain table.
local function tensor_table(t)
  return {dtype = t:dtype(), shape = t:shape(), values = t:contiguous():view(-1):totable()}
end

--- Where two state dicts (nested tables of numbers, strings, booleans and tensors) differ, as a
-- path with the two values ("state.3.exp_avg.values.2: 0.5 vs 0.25"), or nil when they are equal:
-- numbers of the same value and math.type, tensors of the same dtype, shape and values.
function common.state_difference(a, b, path)
  local dle = require("dle")
  path = path or "sd"
  if dle.is_tensor(a) then a = tensor_table(a) end
  if dle.is_tensor(b) then b = tensor_table(b) end
  if type(a) ~= "table" or type(b) ~= "table" then
    if a == b and math.type(a) == math.type(b) then return nil end
    return string.format("%s: %s vs %s", path, tostring(a), tostring(b))
  end
  for k, v in pairs(a) do
    local d = common.state_difference(v, b[k], path .. "." .. tostring(k))
    if d then return d end
  end
  for k, v in pairs(b) do
    if a[k] == nil then return string.format("%s.%s: nil vs %s", path, tostring(k), tostring(v)) end
  end
  return nil
end

--- All of a model's parameter values in one list.
function common.flat_params(m)
  local v = {}
  for _, p in ipairs(m:parameters()) do
    for _, x in ipairs(p:detach():contiguous():view(-1):totable()) do v[#v + 1] = x end
  end
  return v
end

--- The largest difference between two models' parameters.
function common.max_diff(a, b)
  local pa, pb, m = a:parameters(), b:parameters(), 0
  for i = 1, #pa do m = math.max(m, (pa[i] - pb[i]):abs():max():item()) end
  return m
end

--- Values as the report writes them.
function common.format(values)
  local parts = {}
  for i, v in ipairs(values) do
    parts[i] = type(v) == "number" and string.format("%.9g", v) or tostring(v)
  end
  return table.concat(parts, ",")
end

--- A worker's start: dle.dist initialized, one thread per rank (the ranks share the cores).
-- @return the process group (for a <close> variable), rank, world size, emit(key, value)
function common.start()
  local dle = require("dle")
  local pg = dle.dist.init()
  dle.set_num_threads(1)
  local rank = dle.dist.rank()
  return pg, rank, dle.dist.world_size(), function(k, v) common.emit(rank, k, v) end
end

--- Prints one report line (a tensor is written as its flattened values).
function common.emit(rank, key, value)
  if type(value) == "table" or type(value) == "userdata" then
    if type(value) == "userdata" then value = value:contiguous():view(-1):totable() end
    value = common.format(value)
  end
  io.stdout:write(string.format("rank=%d %s=%s\n", rank, key, tostring(value)))
  io.stdout:flush()
end

--- Parses workers' output into results[rank][key] = string.
function common.parse(out)
  local results = {}
  for r, k, v in out:gmatch("rank=(%d+) ([%w_%.]+)=([^\n]*)") do
    r = tonumber(r)
    results[r] = results[r] or {}
    results[r][k] = v
  end
  return results
end

return common
