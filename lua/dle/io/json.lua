--- dle.io.json: JSON through lua-cjson (Debian package lua-cjson), for safetensors headers.
-- A private cjson instance (cjson.new()) so that settings made by other code do not reach it:
-- nesting limited, NaN/Infinity/hex numbers rejected. cjson gives JSON null as cjson.null and
-- every number as a float; `integer` below turns a float that is an exact integer back into one.
-- Without lua-cjson, `require("dle")` still works; JSON use raises an error saying what is missing.
local ok, cjson = pcall(require, "cjson")
local json
if ok then
  json = cjson.new()
  json.decode_max_depth(64)
  json.decode_invalid_numbers(false)
  json.encode_invalid_numbers(false)
  json.encode_max_depth(64)
else
  local missing = "JSON needs lua-cjson (Debian package lua-cjson), which is not installed: " .. tostring(cjson)
  json = {null = {}, decode = function() error(missing, 0) end, encode = function() error(missing, 0) end}
end

local M = {null = json.null}

--- Decodes s; returns the value, or nil and the message (cjson's, or lua-cjson missing).
function M.decode(s)
  local okd, v = pcall(json.decode, s)
  if not okd then return nil, tostring(v) end
  return v
end

--- A JSON string literal for the Lua string s (any bytes; control bytes and 0x7F escaped).
function M.string(s)
  return json.encode(s)
end

-- From 2^53 on, doubles skip integers: a number there may not be what the file says
-- (9007199254740993 reads as 9007199254740992), so it is not trusted.
local EXACT = 1 << 53

--- v as a Lua integer when it is a number holding an integer in (-2^53, 2^53), else nil.
function M.integer(v)
  if type(v) ~= "number" or v ~= v or v <= -EXACT or v >= EXACT then return nil end
  return math.tointeger(v)
end

--- true when t is a table decoded from a JSON array (keys 1..n only; {} counts as empty).
function M.is_array(t)
  if type(t) ~= "table" then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t and (n == 0 or t[n] ~= nil)
end

--- Plain Lua values of a decoded document: null becomes nil, exact integers become integers
-- (for dle.io.json_decode, whose callers expect Lua values).
function M.plain(v)
  if v == json.null then return nil end
  if type(v) == "number" then return M.integer(v) or v end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.plain(x) end
  return out
end

--- The bytes of a file; errors (raised at the caller's caller's line) name fn and the path.
function M.read_text(fn, path)
  local check = require("dle.check")
  local f, err = io.open(path, "rb")
  if not f then check.error(fn .. ": cannot open " .. tostring(err)) end
  local s, rerr = f:read("a")
  f:close()
  if not s then check.error(fn .. ": cannot read " .. path .. ": " .. tostring(rerr)) end
  return s
end

--- A JSON file holding an object, as plain Lua values (M.plain); errors name fn and the path.
function M.read_object(fn, path)
  local check = require("dle.check")
  local v, err = M.decode(M.read_text(fn, path))
  if v == nil then check.error(fn .. ": " .. path .. ": invalid JSON: " .. err) end
  if type(v) ~= "table" or M.is_array(v) and next(v) ~= nil then
    check.error(fn .. ": " .. path .. ": expected a JSON object")
  end
  return M.plain(v)
end

return M
