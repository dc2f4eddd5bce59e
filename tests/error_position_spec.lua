-- error_position_spec.lua — errors raised for a user's mistake point at the user's line, never at
-- a file inside dle (issue 22): for user mistakes across the Lua layer (functional forms, module
-- calls, optimizers, schedulers, amp, init, utils, autograd helpers, einsum, rewrite), whether the
-- error is raised by dle's Lua code, by a C function it calls, or by Lua itself, the message
-- starts with this file's "file:line:" of the call. Errors raised in the user's own callbacks
-- (a Module's forward) keep their lines, and a dle call inside a callback points at the callback.
local dle = require("dle")

local nn, F = dle.nn, dle.nn.functional
local I64 = {dtype = "int64"}

local x = dle.randn(2, 3)
local t0 = dle.tensor({0, 1}, I64)
local function params() return {dle.zeros(2):requires_grad_()} end

-- A .npy file whose header claims a shape far too big to allocate.
local huge_npy = os.tmpname()
do
  local hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000000, 1000), }"
  hdr = hdr .. string.rep(" ", 118 - #hdr) .. "\n"
  local f = assert(io.open(huge_npy, "wb"))
  f:write("\x93NUMPY\x01\x00", string.pack("<I2", #hdr), hdr)
  f:close()
end

-- Each mistake is made on the line its function is defined on (one line each, no tail call).
local mistakes = {
  {"F.cross_entropy with a 0-based target (C error)", function() local _ = F.cross_entropy(x, t0) end},
  {"F.cross_entropy with a 0-based target and weights", function() local _ = F.cross_entropy(x, t0,
      {weight = dle.ones(3)}) end},
  {"F.cross_entropy with int32 targets", function() local _ = F.cross_entropy(x, t0:to("int32")) end},
  {"F.nll_loss with an unknown option", function() local _ = F.nll_loss(x, t0 + 1, {wieght = 1}) end},
  {"F.linear with mismatched shapes", function() local _ = F.linear(x, dle.randn(2, 4)) end},
  {"F.conv2d with the wrong channels (C error)", function() local _ = F.conv2d(dle.randn(1, 2, 5, 5),
                                                                               dle.randn(3, 4, 3, 3)) end},
  {"F.embedding with an id out of range (C error)", function() local _ = F.embedding(dle.tensor({9}, I64),
                                                                                     dle.randn(4, 2)) end},
  {"F.mse_loss with mismatched shapes", function() local _ = F.mse_loss(x, dle.randn(3, 2)) end},
  {"F.dropout with p > 1", function() local _ = F.dropout(x, 2) end},
  {"calling a Linear on the wrong width", function() local _ = nn.Linear(4, 2)(x) end},
  {"calling a Sequential whose second layer does not fit", function() local _ = nn.Sequential(nn.Linear(3, 2),
                                                                                              nn.Linear(5, 1))(x) end},
  {"Module:summary with a bad input shape (error inside a pcall in dle)",
   function() local _ = nn.Linear(3, 2):summary({1, 4}, {print = false}) end},
  {"Module:load_state_dict with a missing key", function() local _ = nn.Linear(3, 2):load_state_dict({}) end},
  {"MultiheadAttention with heads not dividing d", function() local _ = nn.MultiheadAttention(4, 3) end},
  {"Conv2d with a bad kernel", function() local _ = nn.Conv2d(2, 2, 0) end},
  {"SGD with a negative lr", function() local _ = dle.optim.SGD(params(), {lr = -1}) end},
  {"Adam with bad betas", function() local _ = dle.optim.Adam(params(), {betas = {2, 0}}) end},
  {"SGD with an unknown option", function() local _ = dle.optim.SGD(params(), {lr = 0.1, momentun = 0.9}) end},
  {"lr.cosine without total", function() local _ = dle.optim.lr.cosine(dle.optim.SGD(params(), {lr = 0.1}), {}) end},
  {"GradScaler with a negative init_scale", function() local _ = dle.amp.GradScaler({init_scale = -1}) end},
  {"nn.init.kaiming_uniform_ with a bad mode", function() local _ = nn.init.kaiming_uniform_(dle.zeros(2, 2),
                                                                                             {mode = "x"}) end},
  {"nn.utils.clip_grad_norm_ with a bad max_norm", function() local _ = nn.utils.clip_grad_norm_(params(), "x") end},
  {"isclose against a string", function() local _ = x:isclose("a") end},
  {"set_printoptions with a negative precision", function() dle.set_printoptions({precision = -1}) end},
  {"einsum with mismatched operands", function() local _ = dle.einsum("ij,jk->ik", x, dle.randn(4, 2)) end},
  {"gradcheck with a non-function", function() local _ = dle.gradcheck(3, {x}) end},
  {"rewrite.apply on a non-graph", function() local _ = dle.rewrite.apply(3, {}) end},
  {"zeros with an unknown option (C)", function() local _ = dle.zeros(2, {dtyp = "float64"}) end},
  {"load_npy of a file with a huge shape", function() local _ = dle.load_npy(huge_npy) end},
}

local function expect_here(case)
  local info = debug.getinfo(case, "S")
  local ok, err = pcall(case)
  assert.is_false(ok, "no error")
  err = tostring(err)
  local prefix = info.short_src .. ":" .. info.linedefined .. ":"
  assert.are.equal(prefix, err:sub(1, #prefix), err)
  assert.falsy(err:find("lua/dle/", 1, true), err)
  return err
end

describe("errors at the user's line", function()
  for _, m in ipairs(mistakes) do
    it(m[1] .. ": the message starts with this file's line of the call", function() expect_here(m[2]) end)
  end

  teardown(function() os.remove(huge_npy) end)

  it("the message text is kept (function, argument, values)", function()
    local err = expect_here(mistakes[1][2])
    assert.truthy(err:find(": cross_entropy: target 0 (row 1) is out of range for 3 classes (1..3)", 1, true), err)
  end)

  it("an error raised in a user's forward keeps its own line", function()
    local Net = nn.Module:extend("Net")
    local line = debug.getinfo(1, "l").currentline + 1
    function Net:forward() error("boom") end
    local ok, err = pcall(function() return Net()(x) end)
    assert.is_false(ok)
    assert.truthy(err:find(":" .. line .. ": boom$"), err)
  end)

  it("a dle mistake inside a user's forward points at the forward's line", function()
    local Net = nn.Module:extend("Net2")
    function Net:init() self.fc = nn.Linear(4, 2) end
    local line = debug.getinfo(1, "l").currentline + 1
    function Net:forward(v) return F.relu(self.fc(v)) end
    local ok, err = pcall(function() return Net()(x) end)
    assert.is_false(ok)
    assert.truthy(err:find("^[^:]*error_position_spec.lua:" .. line .. ": "), err)
  end)

  it("a non-string error object passes through unchanged", function()
    local obj = {}
    local Net = nn.Module:extend("Net3")
    function Net:forward() error(obj) end
    local ok, err = pcall(function() return Net()(x) end)
    assert.is_false(ok)
    assert.are.equal(obj, err)
  end)
end)
