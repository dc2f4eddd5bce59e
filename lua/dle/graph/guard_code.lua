--- dle.graph.guard_code: a guard's checks as one generated Lua function (see dle.graph.guard).
--
--   local check = guard_code.compile(rec)  -- rec: a finished recorder
--   local changed = check()                -- nil when every recorded value is as traced, else
--                                          -- what changed ("upvalue 'scale' of function at ...")
--
-- Straight-line code rather than a loop over the records: the values are literals (numbers as
-- exact hex floats, strings quoted), each table's fields are read by constant keys, so a
-- replay's guard is mostly plain VM comparisons.
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

--- M.compile(rec) -> a function of no arguments: nil when the recorded state is unchanged, else
-- a description of the first value that changed.
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

  -- "return <what changed>" (a constant: nothing is formatted unless it changed)
  local function fail(what) return " then return " .. const(what) .. " end" end

  emit("local getupvalue, rawequal, mtype, next, getmt, C = ...\nreturn function()\n")
  for k = 1, #r.uf do
    emit(string.format("do local _, v = getupvalue(%s, %d) if %s%s end\n", const(r.uf[k]), r.ui[k],
                       differs("v", r.uv[k], r.ut[k]), fail(r.un[k])))
  end
  for j = 1, #r.tt do
    local name = r.tname[j] or "a table"
    emit("do local t = " .. const(r.tt[j]) .. "\n")
    emit("if not rawequal(getmt(t), " .. (r.tm[j] and const(r.tm[j]) or "nil") .. ")" ..
         fail("the metatable of " .. name) .. "\n")
    emit("local n = 0 for _ in next, t do n = n + 1 end if n ~= " .. r.tn[j] ..
         fail("the fields of " .. name) .. "\n")
    emit("local v\n")
    local kinds = r.tty[j]
    for fk, w in next, r.tf[j] do
      emit("v = t[" .. key(fk) .. "] if " .. differs("v", w, kinds[fk]) ..
           fail(string.format("field '%s' of %s", tostring(fk), name)) .. "\n")
    end
    emit("end\n")
  end
  for j = 1, #r.ge do
    emit(string.format("do local v = %s[%s] if %s%s end\n", const(r.ge[j]), key(r.gk[j]),
                       differs("v", r.gv[j], r.gt[j]), fail("global '" .. tostring(r.gk[j]) .. "'")))
  end
  emit("return nil\nend\n")
  local chunk = assert(load(table.concat(src), "=(dle.compile guard)", "t"))
  return chunk(debug.getupvalue, rawequal, mtype, next, debug.getmetatable, consts)
end

return M
