--- dle.graph.guard_code: a guard's checks as one generated Lua function (see dle.graph.guard).
--
--   local holds = guard_code.compile(rec)   -- rec: a finished recorder
--   if holds() then ... end                 -- true when every recorded value is as traced
--
-- The generic check loops over the recorded values and looks each one's expected value and kind
-- up in tables; this one is straight-line code with the values as literals (numbers as exact hex
-- floats, strings quoted) and each table's fields read by constant keys, so a replay's guard
-- is mostly plain VM comparisons. It answers only yes or no: the generic check, run after a no,
-- says what changed.
local M = {}

local mtype = math.type

-- Lua source for a number, string or boolean constant that reads back as the same value (and
-- math.type), or nil when there is none (NaN, infinities, math.mininteger, other types).
local function literal(v)
  local ty = type(v)
  if ty == "string" then return (string.format("%q", v):gsub("\n", "n")) end
  if ty == "boolean" then return tostring(v) end
  if ty == "number" then
    if mtype(v) == "integer" then
      if v == math.mininteger then return nil end
      return string.format("%d", v)
    end
    if v ~= v or v == math.huge or v == -math.huge then return nil end
    return string.format("%a", v)
  end
  return nil
end

--- M.compile(rec) -> a function of no arguments: true when the recorded state is unchanged.
function M.compile(r)
  local src, consts, nconst = {}, {}, 0
  local function const(v)
    nconst = nconst + 1
    consts[nconst] = v
    return "C[" .. nconst .. "]"
  end
  local function emit(s) src[#src + 1] = s end
  -- a condition true when var (a local) no longer holds w (kind as guard.kind_of gave it)
  local function differs(var, w, kind)
    if kind == true then return "not rawequal(" .. var .. ", " .. const(w) .. ")" end
    if w == nil then return var .. " ~= nil" end
    if w ~= w then return var .. " == " .. var end   -- NaN: differs unless still NaN
    local cond = var .. " ~= " .. (literal(w) or const(w))
    -- 2 == 2.0: where a float and an integer can be equal, compare math.type too
    if kind and w == math.floor(w) then cond = cond .. " or mtype(" .. var .. ") ~= '" .. kind .. "'" end
    return cond
  end
  local function key(k) return literal(k) or const(k) end

  emit("local getupvalue, rawequal, mtype, next, getmt, C = ...\nreturn function()\n")
  for k = 1, #r.uf do
    emit(string.format("do local _, v = getupvalue(%s, %d) if %s then return false end end\n",
                       const(r.uf[k]), r.ui[k], differs("v", r.uv[k], r.ut[k])))
  end
  for j = 1, #r.tt do
    emit("do local t = " .. const(r.tt[j]) .. "\n")
    emit("if not rawequal(getmt(t), " .. (r.tm[j] and const(r.tm[j]) or "nil") .. ") then return false end\n")
    emit("local n = 0 for _ in next, t do n = n + 1 end if n ~= " .. r.tn[j] .. " then return false end\n")
    emit("local v\n")
    local kinds = r.tty[j]
    for fk, w in next, r.tf[j] do
      emit("v = t[" .. key(fk) .. "] if " .. differs("v", w, kinds[fk]) .. " then return false end\n")
    end
    emit("end\n")
  end
  for j = 1, #r.ge do
    emit(string.format("do local v = %s[%s] if %s then return false end end\n",
                       const(r.ge[j]), key(r.gk[j]), differs("v", r.gv[j], r.gt[j])))
  end
  emit("return true\nend\n")
  local chunk = assert(load(table.concat(src), "=(dle.compile guard)", "t"))
  return chunk(debug.getupvalue, rawequal, mtype, next, debug.getmetatable, consts)
end

return M
