-- tour.lua — a first look at dle tensors: creation, views sharing storage, broadcasting arithmetic,
-- comparisons, dtypes, printing and errors. Run it with `scripts/dle examples/tour.lua`.
local dle = require("dle")

local function section(title)
  io.write("\n== ", title, "\n")
end

section("creation")
local a = dle.tensor({{1, 2, 3}, {4, 5, 6}})  -- float32 unless a dtype is given
print(a)
print(dle.zeros(2, 3, {dtype = "int64"}))     -- sizes as varargs, then an options table
print(dle.full({2, 2}, 0.5))                  -- or sizes as a table
print(dle.arange(0, 10, 2))                    -- half-open: 0 2 4 6 8
print(dle.linspace(0, 1, 5))
print(dle.eye(3))
print("shape", table.concat(a:shape(), "x"), "dims", a:dim(), "elements", a:numel(), "dtype", a:dtype())

section("views share storage")
local x = dle.arange(0, 12):view(3, 4)
local xt = x:t()                               -- a transposed view: no copy
print("x:t() strides", table.concat(xt:stride(), ","), "contiguous?", xt:is_contiguous())
local row = x[2]                               -- t[i] selects along dim 1 (1-based)
local col = x:select(2, 1)                     -- column 1
local mid = x:narrow(2, 2, 2)                  -- columns 2..3
row:fill_(-1)                                  -- writes through the view into x
print(x)
print("x[2][3] =", x[2][3], " same storage:", dle.same_storage(x, mid), dle.same_storage(x, x:clone()))
print(col)
print(mid:contiguous():view(6))                -- a copy only because mid is not contiguous

section("arithmetic with broadcasting")
local m = dle.tensor({{1, 2, 3}, {4, 5, 6}})
local v = dle.tensor({10, 20, 30})
print(m + v)                                   -- {2,3} + {3}
print(m * 2 - 1)                               -- numbers on either side
print(1 / m)
print(m:view(2, 3, 1) + v:view(1, 1, 3))       -- {2,3,1} + {1,1,3} -> {2,3,3}
print((-m) ^ 2)
m:add_(100)                                    -- in place
print(m)

section("comparisons give bool tensors")
local s = dle.tensor({3, 1, 4, 1, 5, 9, 2, 6})
print(s:gt(3))
print(s:eq(1))
print(dle.where(s:gt(3), s, dle.zeros(8)))

section("dtypes")
local f = dle.tensor({1.5, -2.25, 3.75})
print(f:double())                              -- float64
print(f:to("int64"))                           -- truncates toward zero
print(f:half())                                -- 16-bit storage formats
print(f:bfloat16())
print((dle.ones(2, {dtype = "int64"}) + 0.5):dtype()) -- int64 with a float number: float32
print((f:double() + f):dtype())                -- float32 with float64: float64

section("printing")
print(dle.tensor(3.25))                        -- a 0-dim tensor
print(dle.arange(0, 24):view(2, 3, 4))         -- higher dims print slice by slice
dle.set_printoptions({precision = 2})
print(dle.tensor({1 / 3, 2 / 3}))
dle.set_printoptions({precision = 4})
print(dle.arange(0, 5000))                     -- big tensors are summarized

section("errors are Lua errors")
local ok, err = pcall(function() return dle.ones(2, 3) + dle.ones(4) end)
print(ok, err)
ok, err = pcall(function() return x:t():view(12) end)
print(ok, err)
