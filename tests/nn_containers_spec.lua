-- nn_containers_spec.lua — dle.nn.ModuleList and dle.nn.ModuleDict (PyTorch's containers, with
-- dle's 1-based names: "layers.1.weight") and Module:double() / float() / half() / bfloat16():
-- registration, names in named_parameters and state_dict, a state_dict round trip, list and dict
-- operations, printing, conversions, and errors naming the method.
local dle = require("dle")
local H = require("helpers")

local nn = dle.nn

local function keys_of(sd)
  local ks = {}
  for k in pairs(sd) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

describe("ModuleList", function()
  it("registers its modules as submodules 1..n: parameters and state_dict are named field.i.param", function()
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.layers = nn.ModuleList{nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)}
    end
    function Net:forward(x)
      for _, l in ipairs(self.layers) do x = l(x) end
      return x
    end
    local net = Net()
    assert.are.same({"layers.1.bias", "layers.1.weight", "layers.3.bias", "layers.3.weight"}, keys_of(net:state_dict()))
    local names = {}
    for name in net:named_parameters() do names[#names + 1] = name end
    assert.are.same({"layers.1.weight", "layers.1.bias", "layers.3.weight", "layers.3.bias"}, names)
    assert.are.equal(4, #net:parameters())
    assert.are.same({4, 1}, net(dle.randn(4, 2)):shape())
    -- the same names as a plain Lua list of modules and as Sequential's
    local Plain = nn.Module:extend("Plain")
    function Plain:init() self.layers = {nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)} end
    assert.are.same(keys_of(Plain():state_dict()), keys_of(net:state_dict()))
    local other = Net()
    other:load_state_dict(net:state_dict())
    assert.are.equal(0, H.max_diff(other.layers[3].weight, net.layers[3].weight))
  end)

  it("append, extend, insert, # and ipairs behave as a list; insert renumbers the names", function()
    local a, b, c, d = nn.Linear(1, 1), nn.Linear(1, 2), nn.Linear(1, 3), nn.Linear(1, 4)
    local ml = nn.ModuleList()
    assert.are.equal(0, #ml)
    assert.are.equal(ml, ml:append(a))
    ml:extend({b, c})
    ml:insert(2, d)
    assert.are.equal(4, #ml)
    assert.are.equal(4, ml:size())
    local seen = {}
    for i, m in ipairs(ml) do seen[i] = m end
    assert.are.same({a, d, b, c}, seen)
    assert.are.same({1, 4, 2, 3}, {ml[1].weight:size(1), ml[2].weight:size(1), ml[3].weight:size(1),
      ml[4].weight:size(1)})
    assert.are.same({"1.bias", "1.weight", "2.bias", "2.weight", "3.bias", "3.weight", "4.bias", "4.weight"},
      keys_of(ml:state_dict()))
    assert.are.equal(4, ml:state_dict()["2.weight"]:size(1))
    assert.truthy(tostring(ml):find("(2): Linear(in_features=1, out_features=4", 1, true))
  end)

  it("errors name the method: non-modules, bad indices, forward", function()
    H.assert_error(function() nn.ModuleList{nn.ReLU(), 3} end, "ModuleList: element 2 is not a module (number)")
    H.assert_error(function() nn.ModuleList():append(dle.ones(2)) end, "ModuleList:append: argument is not a module")
    H.assert_error(function() nn.ModuleList():insert(3, nn.ReLU()) end, "ModuleList:insert: index 3 out of range 1..1")
    H.assert_error(function() nn.ModuleList{nn.ReLU()}(dle.ones(2)) end, "ModuleList: this module has no forward")
  end)
end)

describe("ModuleDict", function()
  it("registers modules by key (sorted from a table, in order from a list of pairs)", function()
    local md = nn.ModuleDict{enc = nn.Linear(2, 2), dec = nn.Linear(2, 3)}
    assert.are.same({"dec", "enc"}, md:keys())
    assert.are.same({"dec.bias", "dec.weight", "enc.bias", "enc.weight"}, keys_of(md:state_dict()))
    local ordered = nn.ModuleDict{{"z", nn.ReLU()}, {"a", nn.Linear(1, 1)}}
    assert.are.same({"z", "a"}, ordered:keys())
    assert.are.equal(ordered.z, ordered:values()[1])
    assert.are.equal("a", ordered:items()[2][1])
    local Net = nn.Module:extend("Net")
    function Net:init() self.heads = md end
    assert.are.same({"heads.dec.bias", "heads.dec.weight", "heads.enc.bias", "heads.enc.weight"},
      keys_of(Net():state_dict()))
  end)

  it("set, contains, pop and size; a popped module leaves parameters and state_dict", function()
    local md = nn.ModuleDict()
    md:set("a", nn.Linear(1, 1)):set("b", nn.Linear(1, 2))
    assert.is_true(md:contains("a"))
    assert.is_false(md:contains("c"))
    assert.are.equal(2, md:size())
    local b = md:pop("b")
    assert.are.equal(2, b.weight:size(1))
    assert.are.same({"a"}, md:keys())
    assert.are.same({"a.bias", "a.weight"}, keys_of(md:state_dict()))
    assert.are.equal(2, #md:parameters())
    md:set("b", nn.Linear(1, 3))
    assert.are.same({"a", "b"}, md:keys())
    assert.are.equal(3, md.b.weight:size(1))
  end)

  it("errors name the method: reserved and non-string keys, non-modules, missing keys", function()
    H.assert_error(function() nn.ModuleDict{keys = nn.ReLU()} end, "ModuleDict:set: key 'keys' is reserved")
    H.assert_error(function() nn.ModuleDict{_x = nn.ReLU()} end, "ModuleDict:set: key '_x' is reserved")
    H.assert_error(function() nn.ModuleDict{training = nn.ReLU()} end, "ModuleDict:set: key 'training' is reserved")
    H.assert_error(function() nn.ModuleDict():set(1, nn.ReLU()) end, "ModuleDict:set: keys must be strings, got number")
    H.assert_error(function() nn.ModuleDict{a = 3} end, "ModuleDict:set: 'a' is not a module (number)")
    H.assert_error(function() nn.ModuleDict():pop("x") end, "ModuleDict:pop: no module under key 'x'")
  end)
end)

describe("Module dtype shorthands", function()
  it("double, float, half and bfloat16 convert every parameter and buffer, keeping them trainable", function()
    local net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    for method, dtype in pairs({double = "float64", float = "float32", half = "float16", bfloat16 = "bfloat16"}) do
      assert.are.equal(net, net[method](net))
      for _, p in ipairs(net:parameters()) do
        assert.are.equal(dtype, p:dtype(), method)
        assert.is_true(p.requires_grad and p.is_leaf, method)
      end
      for _, e in ipairs(net:named_buffers()) do
        if e[2]:is_floating_point() then assert.are.equal(dtype, e[2]:dtype(), method .. " " .. e[1]) end
      end
    end
    net:double()
    local y = net(dle.randn(4, 3, {dtype = "float64"}))
    assert.are.equal("float64", y:dtype())
  end)
end)
