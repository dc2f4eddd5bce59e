--- Lua-side tensor methods: printing (tostring) and small conveniences built on dle.core.
-- Printing follows Torch7's layout (rows of a matrix, "(i,j,.,.) =" headers for higher dims)
-- with a footer "[dle.Tensor float32 of size 2x3]"; tensors of more than
-- `print_options.threshold` elements are summarized with "..." (first and last `edgeitems`).

local check = require("dle.check")

local M = {}

-- An installer rather than only a table of functions: most of it is methods and __tostring on
-- dle.core's tensor metatable, which merging a table into dle cannot put there.
function M.install(dle)
  local Tensor = dle.Tensor
  local mt = dle.metatable

  --- Printing options, like PyTorch's set_printoptions: threshold, edgeitems, precision.
  dle.print_options = {threshold = 1000, edgeitems = 3, precision = 4}

  --- Sets printing options from a table (keys of dle.print_options).
  function dle.set_printoptions(opts)
    check.table(opts, "set_printoptions", "options")
    check.options(opts, "set_printoptions", {"threshold", "edgeitems", "precision"})
    for k, v in pairs(opts) do
      -- threshold may be math.huge (never summarize); edgeitems and precision are bounded so
      -- printing stays cheap and its formats valid
      local ok
      if k == "threshold" then ok = type(v) == "number" and v >= 0
      else ok = math.type(v) == "integer" and v >= 0 and v <= (k == "precision" and 30 or 1 << 20) end
      if not ok then
        check.error(string.format("set_printoptions: %s must be a non-negative %s, got %s", k,
          k == "threshold" and "number" or k == "precision" and "integer up to 30" or "integer up to 2^20",
          tostring(v)))
      end
    end
    for k, v in pairs(opts) do dle.print_options[k] = v end
  end

  local ELLIPSIS = {} -- marks the skipped middle of a summarized dim

  -- Indices to show along a dim of size n.
  local function shown(n, summarize, edge)
    local idx = {}
    if summarize and n > 2 * edge then
      for i = 1, edge do idx[#idx + 1] = i end
      idx[#idx + 1] = ELLIPSIS
      for i = n - edge + 1, n do idx[#idx + 1] = i end
    else
      for i = 1, n do idx[i] = i end
    end
    return idx
  end

  -- Nested Lua table of the values to print (ELLIPSIS where elements are skipped).
  local function gather(t, summarize, edge)
    if not summarize then return t:totable() end
    local out = {}
    for k, i in ipairs(shown(t:size(1), true, edge)) do
      if i == ELLIPSIS then out[k] = ELLIPSIS
      elseif t:dim() == 1 then out[k] = t[i]
      else out[k] = gather(t:select(1, i), true, edge) end
    end
    return out
  end

  local function leaves(v, acc)
    if type(v) == "table" then
      if v ~= ELLIPSIS then for _, x in ipairs(v) do leaves(x, acc) end end
    else
      acc[#acc + 1] = v
    end
    return acc
  end

  local function special(v)
    if v ~= v then return "nan" end
    if v == math.huge then return "inf" end
    if v == -math.huge then return "-inf" end
  end

  -- A uint64 value given as the int64 of the same bits (__tostring reads uint64 tensors through
  -- t:to("int64"), which wraps, since Lua integers stop at 2^63 - 1), written unsigned and exact.
  local function unsigned_text(v)
    if v >= 0 then return string.format("%d", v) end
    local q = (v >> 1) // 5 -- the unsigned value divided by 10 (>> shifts in a zero bit)
    return string.format("%d%d", q, v - q * 10)
  end

  -- One formatter for all values of a tensor, so columns line up. A complex tensor's parts are
  -- formatted with decimals even when whole (`fractional`), as "1.0000+2.0000j".
  local function formatter(values, dtype, precision, fractional)
    if dtype == "bool" then return function(v) return tostring(v) end end
    if dtype == "uint64" then return unsigned_text end
    if not (dtype:find("float") or dtype == "bfloat16") then
      return function(v) return string.format("%d", v) end
    end
    local whole, maxabs, minabs = true, 0, math.huge
    for _, v in ipairs(values) do
      if not special(v) then
        if v ~= math.floor(v) then whole = false end
        local a = math.abs(v)
        if a > maxabs then maxabs = a end
        if a > 0 and a < minabs then minabs = a end
      end
    end
    local fmt
    if whole and maxabs < 1e8 and not fractional then fmt = "%.0f"
    elseif maxabs >= 1e5 or minabs < 1e-4 or maxabs / minabs > 1e3 then fmt = "%." .. precision .. "e"
    else fmt = "%." .. precision .. "f" end
    return function(v) return special(v) or string.format(fmt, v) end
  end

  local function row_text(row, fmt, width)
    local cells = {}
    for k, v in ipairs(row) do
      local s = v == ELLIPSIS and "..." or fmt(v)
      cells[k] = string.rep(" ", width - #s) .. s
    end
    return table.concat(cells, " ")
  end

  local function matrix_lines(m, fmt, width, lines)
    for _, row in ipairs(m) do
      if row == ELLIPSIS then lines[#lines + 1] = string.rep(" ", width - 3) .. "..."
      else lines[#lines + 1] = row_text(row, fmt, width) end
    end
  end

  -- Walks the leading dims of a >2-D value table, printing "(i,j,.,.) =" headers.
  local function slices(v, prefix, depth, ndim, fmt, width, lines)
    if depth == ndim - 1 then
      if #lines > 0 then lines[#lines + 1] = "" end
      lines[#lines + 1] = "(" .. table.concat(prefix, ",") .. ",.,.) ="
      matrix_lines(v, fmt, width, lines)
      return
    end
    for k, sub in ipairs(v) do
      if sub == ELLIPSIS then
        if #lines > 0 then lines[#lines + 1] = "" end
        lines[#lines + 1] = "..."
      else
        prefix[depth] = tostring(sub._label or k)
        slices(sub, prefix, depth + 1, ndim, fmt, width, lines)
      end
    end
    prefix[depth] = nil
  end

  -- Replaces the {re, im} leaves (at depth nd) of a complex tensor's value table by their text,
  -- PyTorch's "1.0000+2.0000j", each part formatted like all the others of its kind.
  local function complex_text(values, nd, precision)
    local pairs_, res, ims = {}, {}, {}
    local function walk(v, d)
      if d == nd then
        pairs_[#pairs_ + 1] = v
        res[#res + 1], ims[#ims + 1] = v[1], math.abs(v[2])
      else
        for _, sub in ipairs(v) do if sub ~= ELLIPSIS then walk(sub, d + 1) end end
      end
    end
    walk(values, 0)
    local fre = formatter(res, "float64", precision, true)
    local fim = formatter(ims, "float64", precision, true)
    local text = {}
    for _, p in ipairs(pairs_) do
      local sign = (p[2] < 0 or (p[2] == 0 and 1 / p[2] < 0)) and "-" or "+"
      text[p] = fre(p[1]) .. sign .. fim(math.abs(p[2])) .. "j"
    end
    local function replace(v, d)
      if d == nd then return text[v] end
      for k, sub in ipairs(v) do if sub ~= ELLIPSIS then v[k] = replace(sub, d + 1) end end
      return v
    end
    return replace(values, 0)
  end

  local function footer(t)
    local sizes = t:shape()
    local s = #sizes == 0 and "[dle.Tensor %s of size ()]" or "[dle.Tensor %s of size %s]"
    local dev = t:device() == "cpu" and "" or (" on " .. t:device())
    return string.format(s, t:dtype(), table.concat(sizes, "x")) .. dev
  end

  --- tostring(t): values and a footer naming dtype and size.
  function mt.__tostring(t)
    check.tensor(t, "tostring", "tensor")
    local opts = dle.print_options
    if t:device() ~= "cpu" then t = t:cpu() end
    local n, nd = t:numel(), t:dim()
    if n == 0 then
      return "[dle.Tensor " .. t:dtype() .. " with no elements, size " .. table.concat(t:shape(), "x") .. "]"
    end
    local summarize = n > opts.threshold
    local src = t:dtype() == "uint64" and t:to("int64") or t
    local values = nd == 0 and src:item() or gather(src, summarize, opts.edgeitems)
    local fmt
    if t:is_complex() then
      values = complex_text(values, nd, opts.precision)
      fmt = tostring
    end
    local flat = leaves(values, {})
    fmt = fmt or formatter(flat, t:dtype(), opts.precision)
    local width = 3
    for _, v in ipairs(flat) do width = math.max(width, #fmt(v)) end
    local lines = {}
    if nd == 0 then lines[1] = fmt(values)
    elseif nd == 1 then lines[1] = row_text(values, fmt, width)
    elseif nd == 2 then matrix_lines(values, fmt, width, lines)
    else
      -- label slices with their real indices, also across summarized gaps
      local function label(v, d, t_size)
        local idx = shown(t_size[d], summarize, opts.edgeitems)
        for k, sub in ipairs(v) do
          if sub ~= ELLIPSIS then
            sub._label = idx[k]
            if d < nd - 2 then label(sub, d + 1, t_size) end
          end
        end
      end
      label(values, 1, t:shape())
      slices(values, {}, 1, nd, fmt, width, lines)
    end
    lines[#lines + 1] = footer(t)
    return table.concat(lines, "\n")
  end

  --- t:type() — "dle.FloatTensor"-style name is not used; returns the dtype string.
  function Tensor.type(t)
    check.tensor(t, "type", "self")
    return t:dtype()
  end

  --- t:tolist() — alias of totable().
  Tensor.tolist = Tensor.totable

  --- t:equal(other) — true when both have the same shape and all elements are equal.
  function Tensor.equal(a, b)
    check.tensor(a, "equal", "self")
    check.tensor(b, "equal", "other")
    local sa, sb = a:shape(), b:shape()
    if #sa ~= #sb then return false end
    for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
    if a:numel() == 0 then return true end
    return a:eq(b):logical_not():to("float32"):sum():item() == 0
  end

  -- The second operand of fn as a tensor (a number or boolean becomes a 0-d one); anything else
  -- is an error naming fn, reported at fn's caller.
  local function operand(b, fn)
    if dle.is_tensor(b) then return b end
    if type(b) == "number" or type(b) == "boolean" then return dle.tensor(b) end
    check.error(string.format("%s: other must be a tensor or a number, got %s", fn, check.typename(b)))
  end

  --- t:logical_and(b), logical_or(b), logical_xor(b): bool tensors, nonzero meaning true,
  -- broadcasting; b may be a number.
  function Tensor.logical_and(a, b)
    check.tensor(a, "logical_and", "input")
    b = operand(b, "logical_and")
    return check.call("logical_and", function() return a:ne(0):minimum(b:ne(0)):ne(0) end)
  end
  --- t:logical_or(b): bool tensor of (t ~= 0) or (b ~= 0), broadcasting; b may be a number.
  function Tensor.logical_or(a, b)
    check.tensor(a, "logical_or", "input")
    b = operand(b, "logical_or")
    return check.call("logical_or", function() return a:ne(0):maximum(b:ne(0)):ne(0) end)
  end
  --- t:logical_xor(b): bool tensor of (t ~= 0) ~= (b ~= 0), broadcasting; b may be a number.
  function Tensor.logical_xor(a, b)
    check.tensor(a, "logical_xor", "input")
    b = operand(b, "logical_xor")
    return check.call("logical_xor", function() return a:ne(0):ne(b:ne(0)) end)
  end

  -- The test behind isclose and allclose; fn names the caller in errors.
  local function isclose(fn, a, b, rtol, atol, equal_nan)
    check.tensor(a, fn, "input")
    b = operand(b, fn)
    rtol = rtol == nil and 1e-5 or check.number(rtol, fn, "rtol")
    atol = atol == nil and 1e-8 or check.number(atol, fn, "atol")
    return check.call(fn, function()
      local finite = a:abs():lt(math.huge):logical_and(b:abs():lt(math.huge))
      local close = (a - b):abs():le(b:abs() * rtol + atol):logical_and(finite):logical_or(a:eq(b))
      if equal_nan then close = close:logical_or(a:ne(a):logical_and(b:ne(b))) end
      return close
    end)
  end
  --- t:isclose(other, rtol, atol, equal_nan) / dle.isclose(a, b, ...): closeness as a bool tensor.
  -- Elementwise |a - b| <= atol + rtol * |b| for finite elements (defaults rtol 1e-5, atol 1e-8,
  -- as PyTorch), broadcasting; an infinity is close only to itself; NaN is close to NaN only with
  -- equal_nan.
  function Tensor.isclose(a, b, rtol, atol, equal_nan) return isclose("isclose", a, b, rtol, atol, equal_nan) end

  --- t:allclose(other, rtol, atol, equal_nan) / dle.allclose(a, b, ...): true when every element
  -- is close (see isclose) and the shapes broadcast.
  function Tensor.allclose(a, b, rtol, atol, equal_nan)
    return isclose("allclose", a, b, rtol, atol, equal_nan):all():item()
  end
  dle.isclose, dle.allclose = Tensor.isclose, Tensor.allclose
end

return M
