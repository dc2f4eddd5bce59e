-- print_spec.lua — tostring(t): values laid out like Torch7 with a
-- "[dle.Tensor <dtype> of size AxB]" footer; 0-dim, 1-D, matrices, "(i,.,.) =" slices of higher
-- dims, bool and integer dtypes, summaries with "..." for large tensors, nan/inf.
local dle = require("dle")

local function lines(s)
  local out = {}
  for line in (s .. "\n"):gmatch("(.-)\n") do out[#out + 1] = line end
  return out
end

local function last_line(s)
  local l = lines(s)
  return l[#l]
end

describe("tostring", function()
  it("shows the values of a matrix and the footer", function()
    local s = tostring(dle.tensor({{1, 2, 3}, {4, 5, 6}}))
    assert.are.same({"  1   2   3", "  4   5   6", "[dle.Tensor float32 of size 2x3]"}, lines(s))
  end)

  it("prints fractions with the precision option", function()
    local s = tostring(dle.tensor({{1.5, 2}, {-3.25, 4}}))
    assert.are.same({" 1.5000  2.0000", "-3.2500  4.0000", "[dle.Tensor float32 of size 2x2]"}, lines(s))
  end)

  it("prints a 0-dim tensor as one value with size ()", function()
    assert.are.same({"3.5000", "[dle.Tensor float32 of size ()]"}, lines(tostring(dle.tensor(3.5))))
    assert.are.same({"7", "[dle.Tensor int64 of size ()]"}, lines(tostring(dle.tensor(7, {dtype = "int64"}))))
  end)

  it("prints a 1-D tensor on one line", function()
    assert.are.same({"  1   2   3", "[dle.Tensor float32 of size 3]"}, lines(tostring(dle.tensor({1, 2, 3}))))
  end)

  it("prints 3-D tensors as (i,.,.) = matrix slices", function()
    local s = tostring(dle.arange(0, 12):view(2, 2, 3))
    assert.are.same({
      "(1,.,.) =", "  0   1   2", "  3   4   5", "",
      "(2,.,.) =", "  6   7   8", "  9  10  11",
      "[dle.Tensor float32 of size 2x2x3]"}, lines(s))
  end)

  it("prints 4-D tensors with two leading indices", function()
    local s = tostring(dle.arange(0, 16):view(2, 2, 2, 2))
    assert.is_truthy(s:find("(1,1,.,.) =", 1, true))
    assert.is_truthy(s:find("(2,2,.,.) =\n 12  13\n 14  15", 1, true))
    assert.are.equal("[dle.Tensor float32 of size 2x2x2x2]", last_line(s))
  end)

  it("prints bool tensors as true/false", function()
    assert.are.same({" true false", "[dle.Tensor bool of size 2]"}, lines(tostring(dle.tensor({true, false}))))
    assert.are.same({"true", "[dle.Tensor bool of size ()]"}, lines(tostring(dle.tensor(true))))
  end)

  it("prints integer dtypes without decimals", function()
    local s = tostring(dle.tensor({{1, -2}, {30, 4}}, {dtype = "int32"}))
    assert.are.same({"  1  -2", " 30   4", "[dle.Tensor int32 of size 2x2]"}, lines(s))
    assert.are.equal("[dle.Tensor uint8 of size 3]", last_line(tostring(dle.tensor({1, 2, 3}, {dtype = "uint8"}))))
    local big = tostring(dle.tensor({math.maxinteger}, {dtype = "int64"}))
    assert.is_truthy(big:find(tostring(math.maxinteger), 1, true))
  end)

  it("prints uint64 values above 2^63 - 1 exactly (Lua integers stop there)", function()
    local u = dle.tensor({-1, math.mininteger, 7}, {dtype = "int64"}):to("uint64")
    assert.are.same({"18446744073709551615  9223372036854775808                    7",
                     "[dle.Tensor uint64 of size 3]"}, lines(tostring(u)))
    assert.are.same({"18446744073709551615", "[dle.Tensor uint64 of size ()]"}, lines(tostring(u:select(1, 1))))
  end)

  it("names every dtype in the footer", function()
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}) do
      assert.are.equal("[dle.Tensor " .. dt .. " of size 2]", last_line(tostring(dle.zeros(2, {dtype = dt}))))
    end
  end)

  it("prints nan and inf", function()
    local s = tostring(dle.tensor({0 / 0, math.huge, -math.huge, 1.5}))
    assert.are.same({"   nan    inf   -inf 1.5000", "[dle.Tensor float32 of size 4]"}, lines(s))
  end)

  it("switches to scientific notation for widely ranging values", function()
    local s = tostring(dle.tensor({1e-5, 1, 1000}))
    assert.are.equal("1.0000e-05 1.0000e+00 1.0000e+03", lines(s)[1])
  end)

  it("summarizes large 1-D tensors with ...", function()
    local s = tostring(dle.arange(0, 2000))
    assert.are.same({"   0    1    2  ... 1997 1998 1999", "[dle.Tensor float32 of size 2000]"}, lines(s))
  end)

  it("summarizes large matrices in both dims", function()
    local l = lines(tostring(dle.arange(0, 2000):view(40, 50)))
    assert.are.equal(8, #l)
    assert.are.equal("   0    1    2  ...   47   48   49", l[1])
    assert.are.equal(" ...", l[4])
    assert.are.equal("1950 1951 1952  ... 1997 1998 1999", l[7])
    assert.are.equal("[dle.Tensor float32 of size 40x50]", l[8])
  end)

  it("summarizes large 3-D tensors with the real slice indices", function()
    local s = tostring(dle.arange(0, 2000):view(10, 10, 20))
    assert.is_truthy(s:find("(3,.,.) =", 1, true))
    assert.is_nil(s:find("(4,.,.) =", 1, true))
    assert.is_truthy(s:find("\n...\n", 1, true))
    assert.is_truthy(s:find("(10,.,.) =", 1, true))
    assert.are.equal("[dle.Tensor float32 of size 10x10x20]", last_line(s))
  end)

  it("prints non-contiguous views by their logical layout", function()
    local s = tostring(dle.arange(0, 6):view(2, 3):t())
    assert.are.same({"  0   3", "  1   4", "  2   5", "[dle.Tensor float32 of size 3x2]"}, lines(s))
    local n = tostring(dle.arange(0, 10):narrow(1, 4, 3))
    assert.are.equal("  3   4   5", lines(n)[1])
  end)

  it("prints empty tensors without values", function()
    local s = tostring(dle.zeros(2, 0))
    assert.is_truthy(s:find("no elements", 1, true))
    assert.is_truthy(s:find("2x0", 1, true))
  end)

  it("set_printoptions changes the precision and rejects unknown options", function()
    dle.set_printoptions({precision = 2})
    local ok, s = pcall(tostring, dle.tensor({1.25, 2}))
    dle.set_printoptions({precision = 4})
    assert.is_true(ok)
    assert.are.equal("1.25 2.00", lines(s)[1])
    assert.has_error(function() dle.set_printoptions({foo = 1}) end)
  end)

  it("float16 and bfloat16 print their stored values", function()
    assert.are.equal("3.1406", lines(tostring(dle.tensor({math.pi}):half()))[1])
    assert.are.equal("3.1406", lines(tostring(dle.tensor({math.pi}):bfloat16()))[1])
  end)
end)
