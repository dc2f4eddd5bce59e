-- The op table (engine/ops.def) is the contract: every op in it must be reachable from Lua.
local dle = require("dle")
local H = require("helpers")

-- ops whose Lua entry point has another name
local lua_name = {pow_scalar = "pow", copy = "clone"}

describe("op table", function()
  local ops = dle.core.op_table()

  it("lists every op once with its arity, kind and differentiability", function()
    assert.is_true(#ops > 50)
    local seen = {}
    for _, op in ipairs(ops) do
      assert.is_nil(seen[op.name], "duplicate op " .. op.name)
      seen[op.name] = true
      assert.is_number(op.inputs)
      assert.is_true(op.outputs >= 1 and op.outputs <= 3)  -- 3: sdpa_backward's dq, dk, dv
      assert.is_string(op.kind)
      assert.is_boolean(op.differentiable)
    end
    assert.is_true(seen.add and seen.matmul and seen.softmax and true)
  end)

  it("exposes every op as a dle function or a tensor method", function()
    local missing = {}
    for _, op in ipairs(ops) do
      local name = lua_name[op.name] or op.name
      local linalg = name:match("^linalg_(.*)$") -- dle.linalg.<x> (lua/dle/linalg.lua)
      if name == "pad" then -- dle.nn.functional.pad, as in PyTorch
        if type(dle.nn.functional.pad) ~= "function" then missing[#missing + 1] = op.name end
      elseif name == "fft" then -- the transforms of dle.fft (lua/dle/fft.lua)
        if type(dle.fft.rfft) ~= "function" then missing[#missing + 1] = op.name end
      elseif linalg then
        if type(dle.linalg[linalg]) ~= "function" then missing[#missing + 1] = op.name end
      elseif type(dle[name]) ~= "function" and type(dle.Tensor[name]) ~= "function" then
        missing[#missing + 1] = op.name
      end
    end
    assert.are.same({}, missing)
  end)

  it("marks integer-valued ops as not differentiable", function()
    local by_name = H.index_by(ops, "name")
    for _, name in ipairs({"eq", "lt", "argmax", "one_hot", "rand", "floor"}) do
      assert.is_false(by_name[name].differentiable, name)
    end
    for _, name in ipairs({"add", "matmul", "exp", "softmax", "gather"}) do
      assert.is_true(by_name[name].differentiable, name)
    end
  end)
end)
