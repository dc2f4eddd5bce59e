--- einsum: Einstein summation, written only with dle tensor ops (permute, reshape, expand, mul,
-- sum, matmul), so autograd and every backend work without code of its own.
-- Each operand first loses its repeated labels (diagonals) and the labels no one else needs
-- (summed); then operands are contracted left to right, each pair as one batched matmul:
-- permute to {batch, kept, contracted} x {batch, contracted, kept}, reshape to 3-D, matmul,
-- reshape back. The result is finally permuted into the output's label order.

local check = require("dle.check")

local dle = require("dle")

local M = {}
-- Errors carry no position prefix, like the engine's own messages.
local function fail(fmt, ...)
  check.error("einsum: " .. string.format(fmt, ...))
end

local function shape_str(t) return "{" .. table.concat(t:shape(), ",") .. "}" end

-- Labels of one subscript string: letters, and "..." (at most once) kept as the token "...".
local function tokens(s)
  local out, i, has_ellipsis = {}, 1, false
  while i <= #s do
    local c = s:sub(i, i)
    if c == "." then
      if s:sub(i, i + 2) ~= "..." then fail("invalid '.' in subscripts '%s' (an ellipsis is '...')", s) end
      if has_ellipsis then fail("subscripts '%s' contain more than one '...'", s) end
      has_ellipsis = true
      out[#out + 1] = "..."
      i = i + 3
    elseif c:match("^%a$") then
      out[#out + 1] = c
      i = i + 1
    else
      fail("invalid character '%s' in subscripts '%s' (labels are letters)", c, s)
    end
  end
  return out, has_ellipsis
end

-- Labels standing for the dims an ellipsis covers: ".1" .. ".E" (they sort before letters).
local function ellipsis_label(j) return "." .. j end

-- Replaces "..." in a token list by the labels of the last `e` of `total` ellipsis dims.
local function expand_ellipsis(toks, e, total)
  local out = {}
  for _, tok in ipairs(toks) do
    if tok == "..." then
      for j = total - e + 1, total do out[#out + 1] = ellipsis_label(j) end
    else
      out[#out + 1] = tok
    end
  end
  return out
end

local function index_of(list, x)
  for i, v in ipairs(list) do if v == x then return i end end
end

-- Parses the equation against the operands: per-operand label lists, the output labels and
-- every label's size. Ellipsis dims broadcast (size 1 against n), letters must match exactly.
local function parse(equation, ops)
  if type(equation) ~= "string" then fail("the equation must be a string, got %s", type(equation)) end
  local eq = equation:gsub("%s", "")
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  lhs = lhs or eq
  if rhs and rhs:find("->", 1, true) then fail("equation '%s' has more than one '->'", equation) end
  local subs = {}
  for s in (lhs .. ","):gmatch("([^,]*),") do subs[#subs + 1] = s end
  if #subs ~= #ops then
    fail("subscripts '%s' name %d operand%s but %d %s given", lhs, #subs, #subs == 1 and "" or "s",
         #ops, #ops == 1 and "was" or "were")
  end

  local toks, ell_dims, total = {}, {}, 0
  for k, s in ipairs(subs) do
    local t, has_ell = tokens(s)
    local nd, letters = ops[k]:dim(), #t - (has_ell and 1 or 0)
    if (has_ell and nd < letters) or (not has_ell and nd ~= letters) then
      fail("operand %d has %d dims but subscripts '%s' name %s%d", k, nd, s,
           has_ell and "at least " or "", letters)
    end
    toks[k], ell_dims[k] = t, has_ell and nd - letters or 0
    total = math.max(total, ell_dims[k])
  end

  local labels, sizes, where = {}, {}, {}
  for k = 1, #ops do
    labels[k] = expand_ellipsis(toks[k], ell_dims[k], total)
    for d, l in ipairs(labels[k]) do
      local n = ops[k]:size(d)
      local prev = sizes[l]
      if prev == nil or (l:sub(1, 1) == "." and prev == 1) then
        sizes[l], where[l] = n, k
      elseif prev ~= n and not (l:sub(1, 1) == "." and n == 1) then
        local j = where[l]
        if l:sub(1, 1) == "." then
          fail("the '...' dims of operand %d %s and operand %d %s do not broadcast", j,
               shape_str(ops[j]), k, shape_str(ops[k]))
        end
        fail("label '%s' has size %d in operand %d %s but size %d in operand %d %s", l, prev, j,
             shape_str(ops[j]), n, k, shape_str(ops[k]))
      end
    end
  end

  local out = {}
  if rhs then
    local t = tokens(rhs)
    out = expand_ellipsis(t, total, total)
    local seen = {}
    for _, l in ipairs(out) do
      if seen[l] then fail("output label '%s' appears more than once in '%s'", l, rhs) end
      if not sizes[l] then fail("output label '%s' does not appear in any operand of '%s'", l, equation) end
      seen[l] = true
    end
  else
    -- implicit output: the ellipsis dims, then labels used exactly once, alphabetically
    local count = {}
    for k = 1, #ops do for _, l in ipairs(labels[k]) do count[l] = (count[l] or 0) + 1 end end
    for l, c in pairs(count) do
      if l:sub(1, 1) == "." or c == 1 then out[#out + 1] = l end
    end
    table.sort(out)
  end
  return labels, out, sizes
end

-- An operand: tensor t whose dim d carries labels[d].
local function operand(t, labels) return {t = t, labels = labels} end

local function sizes_of(labels, sizes)
  local s = {}
  for i, l in ipairs(labels) do s[i] = sizes[l] end
  return s
end

local function product(labels, sizes)
  local n = 1
  for _, l in ipairs(labels) do n = n * sizes[l] end
  return n
end

local function is_identity(perm)
  for i, p in ipairs(perm) do if i ~= p then return false end end
  return true
end

local function permute(t, perm)
  if is_identity(perm) then return t end
  return t:permute(perm)
end

-- Broadcast ellipsis dims of size 1 up to their label's size (a stride-0 view).
local function broadcast(op, sizes)
  local want, differs = sizes_of(op.labels, sizes), false
  for d, n in ipairs(want) do if op.t:size(d) ~= n then differs = true end end
  if differs then op.t = op.t:expand(want) end
  return op
end

-- Takes the diagonal of every repeated label ("ii" -> "i"): multiply by an identity mask
-- over the two dims, then sum the second one away.
local function diagonals(op, sizes)
  local i = 1
  while i <= #op.labels do
    local j = index_of({table.unpack(op.labels, i + 1)}, op.labels[i])
    if j then
      j = i + j
      local n, mshape = sizes[op.labels[i]], {}
      for d = 1, #op.labels do mshape[d] = (d == i or d == j) and n or 1 end
      local mask = dle.eye(n, {dtype = op.t:dtype()}):reshape(mshape)
      op.t = (op.t * mask):sum(j)
      table.remove(op.labels, j)
    else
      i = i + 1
    end
  end
  return op
end

-- Sums away the labels for which keep(label) is false.
local function sum_unkept(op, keep)
  local dims, rest = {}, {}
  for d, l in ipairs(op.labels) do
    if keep(l) then rest[#rest + 1] = l else dims[#dims + 1] = d end
  end
  if #dims == 0 then return op end
  return operand(op.t:sum(dims), rest)
end

local function set_of(...)
  local s = {}
  for _, list in ipairs({...}) do for _, l in ipairs(list) do s[l] = true end end
  return s
end

-- a x b -> one operand carrying the labels in `keep` (a set) that a or b has.
local function contract(a, b, keep, sizes)
  local in_b = set_of(b.labels)
  a = sum_unkept(a, function(l) return keep[l] or in_b[l] end)
  local in_a = set_of(a.labels)
  b = sum_unkept(b, function(l) return keep[l] or in_a[l] end)
  local batch, contracted, a_only, b_only = {}, {}, {}, {}
  for _, l in ipairs(a.labels) do
    if not in_b[l] then a_only[#a_only + 1] = l
    elseif keep[l] then batch[#batch + 1] = l
    else contracted[#contracted + 1] = l end
  end
  for _, l in ipairs(b.labels) do
    if not in_a[l] then b_only[#b_only + 1] = l end
  end

  local function positions(op, ...)
    local perm = {}
    for _, list in ipairs({...}) do
      for _, l in ipairs(list) do perm[#perm + 1] = index_of(op.labels, l) end
    end
    return perm
  end
  local nb, m = product(batch, sizes), product(a_only, sizes)
  local k, n = product(contracted, sizes), product(b_only, sizes)
  local at = permute(a.t, positions(a, batch, a_only, contracted))
  local bt = permute(b.t, positions(b, batch, contracted, b_only))
  local r
  if #batch == 0 then
    r = at:reshape(m, k):matmul(bt:reshape(k, n))
  else
    r = at:reshape(nb, m, k):matmul(bt:reshape(nb, k, n))
  end
  local labels = {}
  for _, list in ipairs({batch, a_only, b_only}) do
    for _, l in ipairs(list) do labels[#labels + 1] = l end
  end
  return operand(r:reshape(sizes_of(labels, sizes)), labels)
end

local function einsum(equation, ops)
  local labels, out, sizes = parse(equation, ops)

  local list = {}
  for k, t in ipairs(ops) do
    list[k] = diagonals(broadcast(operand(t, {table.unpack(labels[k])}), sizes), sizes)
  end
  local out_set = set_of(out)
  -- labels needed after operand k: the output's and those of operands k+1..n
  local function keep_after(k)
    local rest = {out}
    for j = k + 1, #list do rest[#rest + 1] = list[j].labels end
    return set_of(table.unpack(rest))
  end
  local acc = list[1]
  for k = 2, #list do acc = contract(acc, list[k], keep_after(k), sizes) end
  acc = sum_unkept(acc, function(l) return out_set[l] end)

  local perm = {}
  for i, l in ipairs(out) do perm[i] = index_of(acc.labels, l) end
  return permute(acc.t, perm)
end

--- dle.einsum(equation, a, b, ...) or dle.einsum(equation, {a, b, ...}): Einstein summation.
-- equation: "bij,bjk->bik" (spaces allowed; "->out" optional: then the output is the labels
-- used once, alphabetically; "..." stands for broadcast leading dims). Returns a tensor.
-- Under dle.autocast it is one lower-precision op, as in PyTorch: float operands (float64
-- aside) are cast to the autocast dtype and its inner sums and products are not cast again.
function M.einsum(equation, ...)
  local ops = table.pack(...)
  if ops.n == 1 and type(ops[1]) == "table" and not dle.is_tensor(ops[1]) then
    ops = table.pack(table.unpack(ops[1]))
  end
  if ops.n == 0 then fail("no operands given for '%s'", tostring(equation)) end
  for k = 1, ops.n do   -- every operand, nils included (ipairs would stop at a nil)
    if not dle.is_tensor(ops[k]) then fail("operand %d is a %s, not a tensor", k, type(ops[k])) end
  end
  if not dle.is_autocast_enabled() then return einsum(equation, ops) end
  for k = 1, ops.n do ops[k] = dle.core._autocast_lower(ops[k]) end   -- parameters' casts cached
  local was_on = dle.core._autocast_set(false)
  local ok, r = pcall(einsum, equation, ops)
  dle.core._autocast_set(was_on)
  if not ok then error(r, 0) end
  return r
end

return M
