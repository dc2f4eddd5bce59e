--- dle.log.open(path): a metrics log, one JSON object per line (JSONL), appended and flushed line
-- by line so that a run killed midway keeps what it wrote. Keys are written sorted; numbers
-- that JSON cannot hold (NaN, infinities) are written as null; tensors with one element as their
-- number.
--   local log = dle.log.open("run.jsonl")
--   log:write{step = s, loss = l:item(), lr = opt.lr}
--   log:close()
local dle = require("dle")
local check = require("dle.check")
local json = require("dle.io.json")

local Log = {}
Log.__index = Log
Log.__name = "dle.Log"

local function value(v, key)
  if dle.is_tensor(v) then
    if v:numel() ~= 1 then
      check.error(string.format("log:write: %s is a tensor of shape {%s}; only one-element tensors are numbers",
                                key, table.concat(v:shape(), ",")))
    end
    v = v:item()
  end
  local t = type(v)
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    return math.type(v) == "integer" and tostring(v) or string.format("%.17g", v)
  elseif t == "string" then return json.string(v)
  elseif t == "boolean" then return tostring(v) end
  check.error(string.format("log:write: %s is a %s (numbers, strings, booleans, one-element tensors)", key, t))
end

--- log:write{key = value, ...}: appends one line.
function Log:write(record)
  check.table(record, "log:write", "record")
  if not self.file then check.error("log:write: the log " .. self.path .. " is closed") end
  local parts = {}
  for i, k in ipairs(check.string_keys(record, "log:write")) do
    parts[i] = json.string(k) .. ":" .. value(record[k], k)
  end
  self.file:write("{", table.concat(parts, ","), "}\n")
  self.file:flush()
  return self
end

--- log:close()
function Log:close()
  if self.file then self.file:close() end
  self.file = nil
end

--- dle.log.open(path, opts) -> a log appending to path (opts.truncate = true starts it afresh).
local function open(path, opts)
  check.string(path, "log.open", "path")
  opts = check.options(opts, "log.open", {"truncate"})
  local f, err = io.open(path, opts.truncate and "w" or "a")
  if not f then check.error("log.open: cannot open " .. tostring(err)) end
  return setmetatable({file = f, path = path}, Log)
end

--- The records of a JSONL file (a list of tables; null values dropped), for dle.plot.from_log.
local function read(path, fn)
  local f, err = io.open(path, "r")
  if not f then check.error(fn .. ": cannot open " .. tostring(err)) end
  local out, n = {}, 0
  for line in f:lines() do
    n = n + 1
    if line:match("%S") then
      local v, why = json.decode(line)
      if type(v) ~= "table" then
        f:close()
        check.error(string.format("%s: %s line %d is not a JSON object (%s)", fn, path, n, tostring(why or v)))
      end
      out[#out + 1] = json.plain(v)
    end
  end
  f:close()
  return out
end

return {open = open, read = read}
