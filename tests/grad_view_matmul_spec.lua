-- covers: view permute narrow select expand matmul
-- grad_view_matmul_spec.lua — gradient rules of the view ops (view, permute, narrow, select,
-- expand) and of matmul: reverse and forward mode against central finite differences in float64
-- (dle.gradcheck with forward = true) for every attribute variant (negative dims and starts, -1
-- sizes, new leading dims), non-contiguous operands, every PyTorch matmul case (1-D, 2-D,
-- batched with broadcast batch dims), the Lua view methods built on these ops, einsum, and
-- double backward (create_graph) against finite differences of the gradient and closed forms.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

local function randn(...)
  return dle.randn({...}, F64)
end

local check = H.gradcheck

--- A fresh tensor holding y's values (y * 1): a view's result shares its input's storage, and
-- the finite differences must see the values of each perturbed run, not the restored input.
local function fresh(y) return y * 1 end

local gradients_of = H.gradients_of

local function assert_close(expected, got, tol)
  tol = tol or 1e-9
  assert.are.same(expected:shape(), got:shape())
  local e, g = expected:contiguous():view(-1):totable(), got:contiguous():view(-1):totable()
  for i = 1, #e do
    assert(math.abs(e[i] - g[i]) <= tol * (1 + math.abs(e[i])),
           string.format("element %d: expected %.10g, got %.10g", i, e[i], g[i]))
  end
end

before_each(function() dle.manual_seed(1234) end)

describe("view gradients", function()
  it("view to new sizes with a -1 (reverse reshapes back, forward reshapes the tangent)", function()
    check(function(x) return fresh(x:view(5, -1)) end, {randn(3, 5)})
    check(function(x) return fresh(x:view(-1)) end, {randn(3, 5)})
    check(function(x) return fresh(x:view(1, 3, 1, 5)) end, {randn(3, 5)})
  end)

  it("view of a 0-dim tensor and to a 0-dim tensor", function()
    check(function(x) return fresh(x:view(1, 1)) end, {randn()})
    check(function(x) return fresh(x:view({})) end, {randn(1)})
  end)

  it("view of non-contiguous inputs (transposed, narrowed) where strides allow it", function()
    check(function(x) return fresh(x:t():view(5, 1, 3)) end, {randn(3, 5)})
    check(function(x) return fresh(x:narrow(3, 2, 2):view(6, 2)) end, {randn(2, 3, 4)})
  end)

  it("view composed with a non-view op before and after", function()
    check(function(x) return (x * x):view(15):exp() end, {randn(3, 5)})
  end)
end)

describe("permute gradients", function()
  it("permute of 3 dims (inverse permutation in reverse)", function()
    check(function(x) return fresh(x:permute(3, 1, 2)) end, {randn(2, 3, 4)})
    check(function(x) return fresh(x:permute(2, 3, 1)) end, {randn(2, 3, 4)})
  end)

  it("permute with negative dims", function()
    check(function(x) return fresh(x:permute(-1, -3, -2)) end, {randn(2, 3, 4)})
  end)

  it("permute of a transposed (non-contiguous) input, then a product", function()
    check(function(x) return x:t():permute(2, 1) * x end, {randn(3, 5)})
  end)

  it("transpose and t via their Lua methods", function()
    check(function(x) return fresh(x:transpose(1, 3)) end, {randn(2, 3, 4)})
    check(function(x) return fresh(x:transpose(-1, -2)) end, {randn(2, 3, 4)})
    check(function(x) return fresh(x:t()) end, {randn(3, 5)})
    check(function(x) return fresh(x:t()) end, {randn(4)})
  end)
end)

describe("narrow gradients", function()
  it("narrow in the middle, at the start and at the end (zero padding both sides)", function()
    check(function(x) return fresh(x:narrow(2, 2, 3)) end, {randn(3, 5)})
    check(function(x) return fresh(x:narrow(2, 1, 2)) end, {randn(3, 5)})
    check(function(x) return fresh(x:narrow(1, 2, 2)) end, {randn(3, 5)})
  end)

  it("narrow of the whole dim", function()
    check(function(x) return fresh(x:narrow(2, 1, 5)) end, {randn(3, 5)})
  end)

  it("narrow with a negative dim and a negative start", function()
    check(function(x) return fresh(x:narrow(-1, -3, 2)) end, {randn(3, 5)})
    check(function(x) return fresh(x:narrow(-2, -1, 1)) end, {randn(3, 5)})
  end)

  it("narrow to length 0", function()
    check(function(x) return fresh(x:narrow(2, 3, 0)) end, {randn(3, 5)})
  end)

  it("narrow of a transposed input, and narrow twice", function()
    check(function(x) return fresh(x:t():narrow(2, 2, 2)) end, {randn(3, 5)})
    check(function(x) return fresh(x:narrow(1, 2, 3):narrow(2, 2, 1)) end, {randn(4, 3, 5)})
  end)

  it("overlapping narrows sum their gradients", function()
    check(function(x) return x:narrow(2, 1, 3) * x:narrow(2, 2, 3) end, {randn(3, 5)})
  end)
end)

describe("select gradients", function()
  it("select on each dim, first, middle and last index", function()
    check(function(x) return fresh(x:select(1, 1)) end, {randn(3, 5)})
    check(function(x) return fresh(x:select(2, 3)) end, {randn(3, 5)})
    check(function(x) return fresh(x:select(2, 5)) end, {randn(3, 5)})
    check(function(x) return fresh(x:select(2, 2)) end, {randn(2, 3, 4)})
  end)

  it("select with a negative dim and a negative index", function()
    check(function(x) return fresh(x:select(-1, -2)) end, {randn(3, 5)})
    check(function(x) return fresh(x:select(-3, -1)) end, {randn(2, 3, 4)})
  end)

  it("select down to a 0-dim tensor", function()
    check(function(x) return fresh(x:select(1, 3)) end, {randn(4)})
  end)

  it("select of a transposed input, and t[i] indexing", function()
    check(function(x) return fresh(x:t():select(1, 2)) end, {randn(3, 5)})
    check(function(x) return fresh(x[2]) end, {randn(3, 5)})
  end)

  it("several selects of one input sum their gradients", function()
    check(function(x) return x:select(1, 1) * x:select(1, 3) + x:select(1, 1) end, {randn(3, 5)})
  end)
end)

describe("expand gradients", function()
  it("expand of size-1 dims (reverse sums over them)", function()
    check(function(x) return fresh(x:expand(3, 5)) end, {randn(3, 1)})
    check(function(x) return fresh(x:expand(4, 5)) end, {randn(1, 5)})
    check(function(x) return fresh(x:expand(2, 3, 4)) end, {randn(1, 3, 1)})
  end)

  it("expand with new leading dims and -1 sizes", function()
    check(function(x) return fresh(x:expand(2, 3, 5)) end, {randn(5)})
    check(function(x) return fresh(x:expand(2, -1, 4)) end, {randn(3, 1)})
    check(function(x) return fresh(x:expand(2, 1, 3, 5)) end, {randn(3, 5)})
  end)

  it("expand of a 0-dim tensor, and expand to the same shape", function()
    check(function(x) return fresh(x:expand(3, 2)) end, {randn()})
    check(function(x) return fresh(x:expand(3, 5)) end, {randn(3, 5)})
  end)

  it("expand of a transposed input, and expand_as", function()
    check(function(x) return fresh(x:t():expand(2, 3, 1)) end, {randn(1, 3)})
    check(function(x, y) return x:expand_as(y) * y end, {randn(1, 5), randn(3, 5)})
  end)
end)

describe("view methods built on the view ops", function()
  it("reshape (a view) of a contiguous input", function()
    check(function(x) return fresh(x:reshape(5, 3)) end, {randn(3, 5)})
    check(function(x) return fresh(x:reshape(-1, 2, 2)) end, {randn(3, 4)})
  end)

  it("reshape of a transposed input (a copy, then a view)", function()
    check(function(x) return fresh(x:t():reshape(15)) end, {randn(3, 5)})
    check(function(x) return fresh(x:permute(2, 1, 3):reshape(3, -1)) end, {randn(2, 3, 4)})
  end)

  it("flatten (all dims, and a dim range)", function()
    check(function(x) return fresh(x:flatten()) end, {randn(2, 3, 4)})
    check(function(x) return fresh(x:flatten(2, 3)) end, {randn(2, 3, 4)})
  end)

  it("squeeze (all size-1 dims, and one dim) and unsqueeze (incl. negative)", function()
    check(function(x) return fresh(x:squeeze()) end, {randn(3, 1, 5, 1)})
    check(function(x) return fresh(x:squeeze(2)) end, {randn(3, 1, 5)})
    check(function(x) return fresh(x:unsqueeze(1)) end, {randn(3, 5)})
    check(function(x) return fresh(x:unsqueeze(-1)) end, {randn(3, 5)})
  end)

  it("a chain of views: permute, narrow, select, unsqueeze, expand", function()
    check(function(x)
      return fresh(x:permute(3, 1, 2):narrow(1, 2, 2):select(2, -1):unsqueeze(1):expand(3, 2, 3))
    end, {randn(2, 3, 4)})
  end)
end)

describe("matmul gradients", function()
  local function mm(a, b) return a:matmul(b) end

  it("2-D . 2-D", function()
    check(mm, {randn(3, 5), randn(5, 2)})
  end)

  it("1-D . 1-D (dot product, 0-dim result)", function()
    check(mm, {randn(5), randn(5)})
  end)

  it("1-D . 2-D and 2-D . 1-D", function()
    check(mm, {randn(3), randn(3, 4)})
    check(mm, {randn(4, 3), randn(3)})
  end)

  it("batched . batched, same batch dims", function()
    check(mm, {randn(2, 3, 4), randn(2, 4, 3)})
  end)

  it("batched with broadcast batch dims (size 1 and missing)", function()
    check(mm, {randn(2, 1, 2, 3), randn(3, 3, 2)})
    check(mm, {randn(3, 2, 4), randn(4, 3)})
    check(mm, {randn(2, 3), randn(2, 2, 3, 2)})
  end)

  it("1-D with batched operands", function()
    check(mm, {randn(3), randn(2, 3, 4)})
    check(mm, {randn(2, 4, 3), randn(3)})
  end)

  it("transposed (non-contiguous) operands", function()
    check(function(a, b) return a:t():matmul(b:t()) end, {randn(5, 3), randn(2, 5)})
    check(function(a, b) return a:transpose(-1, -2):matmul(b) end, {randn(2, 4, 3), randn(1, 4, 2)})
    check(function(a, b) return a:matmul(b:narrow(2, 2, 2)) end, {randn(3, 4), randn(4, 5)})
  end)

  it("the same tensor on both sides (x x^T, x . x)", function()
    check(function(x) return x:matmul(x:t()) end, {randn(3, 4)})
    check(function(x) return x:matmul(x) end, {randn(4)})
  end)

  it("with only one operand requiring grad (forward and reverse)", function()
    local w = randn(4, 2)
    check(function(a) return a:matmul(w) end, {randn(3, 4)})
    local a = randn(3, 4)
    check(function(b) return a:matmul(b) end, {randn(4)})
  end)

  it("mm, bmm, mv, dot and outer via their Lua functions", function()
    check(function(a, b) return dle.mm(a, b) end, {randn(3, 4), randn(4, 2)})
    check(function(a, b) return dle.bmm(a, b) end, {randn(2, 3, 4), randn(2, 4, 2)})
    check(function(a, b) return dle.mv(a, b) end, {randn(3, 4), randn(4)})
    check(function(a, b) return dle.dot(a, b) end, {randn(4), randn(4)})
    check(function(a, b) return dle.outer(a, b) end, {randn(3), randn(4)})
  end)

  it("gives float32 gradients for float32 operands", function()
    local a = dle.randn({3, 4}):requires_grad_(true)
    local b = dle.randn({4, 2}):requires_grad_(true)
    a:matmul(b):sum():backward()
    assert.are.equal("float32", a.grad:dtype())
    assert.are.same({3, 4}, a.grad:shape())
    assert.are.same({4, 2}, b.grad:shape())
  end)
end)

describe("matmul double backward", function()
  it("grad of the sum of the gradients of sum(a b) is the closed form (N, M times ones)", function()
    local a = randn(3, 4):requires_grad_(true)
    local b = randn(4, 5):requires_grad_(true)
    local g = dle.grad(a:matmul(b):sum(), {a, b}, {create_graph = true})
    assert.is_true(g[1].requires_grad and g[2].requires_grad)
    local gg = dle.grad(g[1]:sum() + g[2]:sum(), {a, b})
    -- sum(dL/da) = 3 sum(b) and sum(dL/db) = 5 sum(a)
    assert_close(dle.full({3, 4}, 5, F64), gg[1])
    assert_close(dle.full({4, 5}, 3, F64), gg[2])
  end)

  it("second derivatives of sum((a b)^2) match finite differences of the gradient", function()
    local f = function(a, b) local y = a:matmul(b) return (y * y):sum() end
    check(gradients_of(f), {randn(3, 4), randn(4, 2)}, {forward = false})
  end)

  it("second derivatives with 1-D and broadcast batched operands", function()
    local f = function(a, b) local y = a:matmul(b) return (y * y):sum() end
    check(gradients_of(f), {randn(3), randn(2, 3, 2)}, {forward = false})
    check(gradients_of(f), {randn(2, 1, 2, 3), randn(2, 3, 2)}, {forward = false})
  end)

  it("the create_graph gradient of sum((a b)^2) varies as the closed form 2 v b b^T", function()
    -- d/dt grad_a(a + t v) = 2 v b b^T, by central differences of the gradient
    local a, b, v = randn(3, 4), randn(4, 2), randn(3, 4)
    local function grad_a(x)
      local xr = x:requires_grad_(true)
      return dle.grad((xr:matmul(b) * xr:matmul(b)):sum(), {xr}, {create_graph = true})[1]
    end
    local expected = (v:matmul(b):matmul(b:t())) * 2
    local eps = 1e-6
    local numeric = (grad_a(a + v * eps):detach() - grad_a(a - v * eps):detach()) / (2 * eps)
    assert_close(expected, numeric, 1e-5)
  end)
end)

describe("addmm (matmul with an addend: a b + c)", function()
  local function addmm(c, a, b) return dle.addmm(c, a, b) end

  it("reverse and forward mode, with c broadcast along rows, full, or over a batch", function()
    check(addmm, {randn(4), randn(3, 5), randn(5, 4)})            -- a Linear layer's bias
    check(addmm, {randn(3, 4), randn(3, 5), randn(5, 4)})
    check(addmm, {randn(1, 4), randn(2, 3, 5), randn(5, 4)})      -- batched input
    check(addmm, {randn(2, 1, 1), randn(2, 3, 5), randn(2, 5, 4)})
    check(function(c, a, b) return dle.addmm(c, a, b:t()) end, {randn(4), randn(3, 5), randn(4, 5)})
  end)

  it("second derivatives through a b + c", function()
    local f = function(c, a, b) local y = dle.addmm(c, a, b) return (y * y):sum() end
    check(gradients_of(f), {randn(4), randn(3, 5), randn(5, 4)}, {forward = false})
  end)
end)

describe("view ops double backward", function()
  it("second derivatives through view, permute and expand", function()
    local f = function(x, y)
      local z = x:view(5, 3):permute(2, 1):unsqueeze(1):expand(2, 3, 5) * y
      return (z * z):sum()
    end
    check(gradients_of(f), {randn(3, 5), randn(3, 5)}, {forward = false})
  end)

  it("second derivatives through narrow and select", function()
    local f = function(x)
      local z = x:narrow(2, 2, 3) * x:select(2, -1):unsqueeze(2)
      return (z * z):sum()
    end
    check(gradients_of(f), {randn(3, 5)}, {forward = false})
  end)
end)

describe("einsum gradients (composed of view ops, mul, sum and matmul)", function()
  it("ij,jk->ik", function()
    check(function(a, b) return dle.einsum("ij,jk->ik", a, b) end, {randn(3, 4), randn(4, 2)})
  end)

  it("bij,bjk->bik", function()
    check(function(a, b) return dle.einsum("bij,bjk->bik", a, b) end, {randn(2, 3, 4), randn(2, 4, 2)})
  end)

  it("sums: ij->j, ij->, and ij,ij->i", function()
    check(function(a) return dle.einsum("ij->j", a) end, {randn(3, 5)})
    check(function(a) return dle.einsum("ij->", a) end, {randn(3, 5)})
    check(function(a, b) return dle.einsum("ij,ij->i", a, b) end, {randn(3, 5), randn(3, 5)})
  end)

  it("second derivatives of sum(einsum('bij,bjk->bik')^2)", function()
    local f = function(a, b) local y = dle.einsum("bij,bjk->bik", a, b) return (y * y):sum() end
    check(gradients_of(f), {randn(2, 3, 2), randn(2, 2, 3)}, {forward = false})
  end)

  it("a transposed output: ij,jk->ki", function()
    check(function(a, b) return fresh(dle.einsum("ij,jk->ki", a, b)) end, {randn(3, 4), randn(4, 2)})
  end)
end)
