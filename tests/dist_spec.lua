-- dist_spec.lua — dle.dist (MPI), DistributedDataParallel, ZeroRedundancyOptimizer and the backward
-- hooks DDP rides on. In this process: loading, a world of one (no mpirun: rank 0 of 1), argument
-- errors. Across processes: `mpirun -np 2` runs the workers in tests/dist/ and their reports
-- (rank=<r> <key>=<values> lines) are checked here; pending when mpirun is not installed.
local dle = require("dle")
local H = require("helpers")
local common = require("dist.common")

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
if root:sub(1, 1) ~= "/" then root = os.getenv("PWD") .. "/" .. root end
local build = os.getenv("DLE_BUILD") or "build"
if build:sub(1, 1) ~= "/" then build = root .. "/" .. build end

local q = H.shell_quote

-- Runs a shell command from the repository root; returns its output (stdout and stderr), whether
-- it exited 0, and its wall time in seconds.
local function sh(cmd)
  local t0 = dle.time()
  local p = assert(io.popen("cd " .. q(root) .. " && (" .. cmd .. ") 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok == true, dle.time() - t0
end

-- The environment prefix that makes lua5.4 find this checkout's dle (as .busted does). MPI's own
-- variables are dropped: this process may be an MPI singleton itself, and its children must not
-- take them for a job of their own.
local ENV = "unset $(env | sed -n 's/^\\(OMPI_[A-Za-z0-9_]*\\|PMIX_[A-Za-z0-9_]*\\|ORTE_[A-Za-z0-9_]*\\)=.*/\\1/p'); "
  .. "export LUA_PATH=" .. q(root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. root .. "/tests/?.lua;;")
  .. " LUA_CPATH=" .. q(build .. "/lib/?.so;;") .. "; "

-- Runs a Lua chunk in a fresh lua5.4 process.
local function lua(code, env)
  return sh(ENV .. (env or "") .. " lua5.4 -e " .. q(code))
end

-- f(...) must fail: returns the error message.
local function err(f, ...)
  local args = table.pack(...)
  return H.assert_error(function() return f(table.unpack(args, 1, args.n)) end)
end

local function close_to(a, b, tol) return math.abs(a - b) <= tol end

describe("dle.dist loading", function()
  it("require('dle') loads no MPI; dle.dist loads it on init() only", function()
    local out, ok = lua([[
      local dle = require("dle")
      io.write(tostring(package.loaded["dle.dist_native"] ~= nil), " ")
      local dist = dle.dist
      io.write(tostring(package.loaded["dle.dist_native"] ~= nil), " ")
      local _ = dle.optim.ZeroRedundancyOptimizer
      io.write(tostring(package.loaded["dle.dist_native"] ~= nil), " ")
      dist.init()
      io.write(tostring(package.loaded["dle.dist_native"] ~= nil), " ", dist.rank(), " ", dist.world_size())]])
    assert.is_true(ok, out)
    assert.are.equal("false false false true 0 1", out)
  end)

  it("before init(), rank, world_size and the collectives raise errors naming the function", function()
    local out, ok = lua([[
      local dle = require("dle")
      local dist = dle.dist
      for _, f in ipairs({"rank", "world_size", "barrier", "all_reduce", "broadcast"}) do
        local ok, err = pcall(dist[f], dle.zeros(2))
        print(ok, err)
      end
      print(dist.is_initialized())]])
    assert.is_true(ok, out)
    for _, f in ipairs({"rank", "world_size", "barrier", "all_reduce", "broadcast"}) do
      assert.truthy(out:find("false\t(command line):4: " .. f
                             .. ": dle.dist is not initialized; call dle.dist.init() first",
                             1, true), f .. ":\n" .. out)
    end
    assert.truthy(out:find("\nfalse\n$"), out)
  end)

  it("without the MPI module, init() says MPI support was not built and is_available() says why", function()
    -- a module path holding dle.core and dle.native but no dle.dist_native
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir .. "/dle") .. " && ln -s " .. q(build .. "/lib/dle/core.so") .. " "
      .. q(build .. "/lib/dle/native.so") .. " " .. q(dir .. "/dle/")))
    local out, ok = lua([[
      local dle = require("dle")
      print(dle.dist.is_available())
      print(pcall(dle.dist.init))]], "LUA_CPATH=" .. q(dir .. "/?.so"))
    os.execute("rm -rf " .. q(dir))
    assert.is_true(ok, out)
    assert.truthy(out:find("false\tdle.dist: MPI support was not built (no dle/dist_native.so beside "
                           .. dir .. "/dle/core.so: libopenmpi-dev was missing", 1, true), out)
    assert.truthy(out:find("\nfalse\t.*dle.dist: MPI support was not built"), out)
  end)
end)

describe("dle.dist in a world of one process", function()
  local dist = dle.dist
  local pg = dist.init()

  it("init() is idempotent and returns the process group; rank 0 of 1", function()
    assert.are.equal(pg, dist.init())
    assert.is_true(dist.is_initialized())
    assert.is_true(dist.is_available())
    assert.are.equal(0, dist.rank())
    assert.are.equal(1, dist.world_size())
    assert.truthy(tostring(pg):find("rank 0 of 1", 1, true), tostring(pg))
    dist.barrier()
  end)

  it("all_reduce is the identity for every dtype and op, in place, on contiguous and transposed tensors", function()
    for _, dt in ipairs(common.DTYPES) do
      local ops = {"sum", "max", "min", "prod"}
      if common.FLOATS[dt] then ops[#ops + 1] = "mean"; ops[#ops + 1] = "avg" end
      for _, op in ipairs(ops) do
        local values = common.values(dt, 0)
        local t = dle.tensor(values, {dtype = dt})
        assert.is_true(rawequal(t, dist.all_reduce(t, op)), dt .. " " .. op)
        assert.are.same(values, t:totable(), dt .. " " .. op)
        local m = dle.tensor(values, {dtype = dt}):view(2, 3)
        local v = m:t()
        assert.is_true(rawequal(v, dist.all_reduce(v, op)))
        assert.are.same(dle.tensor(values, {dtype = dt}):view(2, 3):totable(), m:totable(), dt .. " " .. op)
      end
    end
  end)

  it("broadcast from root 0 is the identity for every dtype and returns its tensor", function()
    for _, dt in ipairs(common.DTYPES) do
      local values = common.values(dt, 0)
      local t = dle.tensor(values, {dtype = dt})
      assert.is_true(rawequal(t, dist.broadcast(t, 0)))
      assert.is_true(rawequal(t, dist.broadcast(t)))
      assert.are.same(values, t:totable(), dt)
    end
  end)

  it("bad arguments raise errors naming the function, the argument and the shapes/dtypes", function()
    assert.truthy(err(dist.all_reduce, "x"):find("all_reduce: tensor must be a tensor, got string", 1, true))
    assert.truthy(err(dist.all_reduce, dle.zeros(2), "median"):find("all_reduce: unknown op 'median'", 1, true))
    assert.truthy(err(dist.all_reduce, dle.zeros(2), 3):find("all_reduce: op must be a string, got number", 1, true))
    assert.truthy(err(dist.all_reduce, dle.zeros(2, {dtype = "int32"}), "mean")
      :find("all_reduce: op 'mean' needs a floating-point tensor, got int32", 1, true))
    assert.truthy(err(dist.all_reduce, dle.zeros(1, 3):expand(2, 3))
      :find("all_reduce: cannot write into an expanded tensor of shape {2,3}", 1, true))
    local leaf = dle.zeros(2, 2, {requires_grad = true})
    assert.truthy(err(dist.all_reduce, leaf)
      :find("all_reduce: a leaf tensor that requires grad (shape {2,2}) cannot be written in place", 1, true))
    dle.no_grad(function() dist.all_reduce(leaf) end)   -- allowed under no_grad
    assert.truthy(err(dist.all_reduce, leaf * 2)
      :find("all_reduce: cannot write in place into a tensor that is part of an autograd graph (shape {2,2})", 1, true))
    assert.truthy(err(dist.broadcast, dle.zeros(2), 1):find("broadcast: root 1 is not a rank (ranks are 0..0)", 1,
                                                            true))
    assert.truthy(err(dist.broadcast, dle.zeros(2), -1):find("broadcast: root -1 is not a rank", 1, true))
    assert.truthy(err(dist.broadcast, dle.zeros(2), 0.5):find("broadcast: root must be an integer, got number 0.5", 1,
                                                              true))
    assert.truthy(err(dist.broadcast, {}, 0):find("broadcast: tensor must be a tensor, got table", 1, true))
    assert.truthy(err(dist.abort, "now"):find("abort: code must be an integer, got string", 1, true))
  end)

  it("dle.core._raw_buffer gives a contiguous CPU tensor's pointer, size and dtype, and refuses others", function()
    local t = dle.zeros(2, 3, {dtype = "float16"})
    local v0 = t:_version()
    local p, n, dt = dle.core._raw_buffer(t, "f", true)
    assert.are.equal("userdata", type(p))
    assert.are.equal(6, n)
    assert.are.equal("float16", dt)
    assert.is_true(t:_version() > v0, "a writable buffer bumps the version")
    local ok, e = pcall(dle.core._raw_buffer, t:t(), "myfn")
    assert.is_false(ok)
    assert.truthy(e:find("myfn: the tensor must be contiguous (shape {3,2}, strides {1,3})", 1, true), e)
    assert.is_nil(dle.raw_buffer, "internal: not in the public dle table")
  end)

  local function mlp(seed)
    dle.manual_seed(seed)
    return dle.nn.Sequential(dle.nn.Linear(4, 6), dle.nn.ReLU(), dle.nn.Linear(6, 2))
  end
  local train_step = common.train_step   -- one step of cross-entropy training
  local function same_params(a, b)
    for i, p in ipairs(a:parameters()) do
      assert.are.same(p:totable(), b:parameters()[i]:totable())
    end
  end
  -- trains model m1 with o1 and m2 with o2 for n steps on (x, y); their parameters must agree
  local function train_alike(m1, o1, m2, o2, n, x, y)
    for _ = 1, n do
      train_step(m1, o1, x, y)
      train_step(m2, o2, x, y)
    end
    same_params(m1, m2)
  end

  it("DistributedDataParallel trains exactly like the bare model and reaches its methods", function()
    local plain, wrapped = mlp(3), mlp(3)
    local ddp = dist.DistributedDataParallel(wrapped)
    assert.are.equal(wrapped, ddp.module)
    assert.is_true(rawequal(wrapped:parameters()[1], ddp:parameters()[1]))
    local names = {}
    for name in ddp:named_parameters() do names[#names + 1] = name end
    assert.are.same({"1.weight", "1.bias", "3.weight", "3.bias"}, names)
    local sd = ddp:state_dict()
    assert.truthy(sd["1.weight"])
    ddp:load_state_dict(plain:state_dict())
    ddp:eval()
    assert.is_false(wrapped.training)
    ddp:train()
    assert.is_true(wrapped.training)
    local x, y = dle.randn(5, 4), dle.randint(1, 3, {5})
    local o1 = dle.optim.SGD(plain:parameters(), {lr = 0.1})
    local o2 = dle.optim.SGD(ddp:parameters(), {lr = 0.1})
    train_alike(plain, o1, ddp, o2, 3, x, y)
    ddp:zero_grad()
    assert.is_nil(wrapped:parameters()[1].grad)
  end)

  it("DistributedDataParallel:no_sync returns fn's results, rethrows its errors and restores syncing", function()
    local ddp = dist.DistributedDataParallel(mlp(1))
    local a, b = ddp:no_sync(function(u, v) return u + 1, v end, 1, "x")
    assert.are.equal(2, a)
    assert.are.equal("x", b)
    local ok, e = pcall(ddp.no_sync, ddp, function() error("inner failure") end)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("inner failure", 1, true))
    assert.is_true(ddp._sync)
    ok, e = pcall(ddp.no_sync, ddp, 42)
    assert.is_false(ok)
    assert.truthy(e:find("DistributedDataParallel:no_sync: fn must be a function, got number 42", 1, true), e)
  end)

  it("DistributedDataParallel refuses a non-module and unknown or bad options", function()
    local ok, e = pcall(dist.DistributedDataParallel, {})
    assert.is_false(ok)
    assert.truthy(e:find("DistributedDataParallel: model must be a dle.nn.Module, got table", 1, true), e)
    ok, e = pcall(dist.DistributedDataParallel, mlp(1), {bucket_mb = 1})
    assert.is_false(ok)
    assert.truthy(e:find("DistributedDataParallel: unknown option 'bucket_mb'", 1, true), e)
    ok, e = pcall(dist.DistributedDataParallel, mlp(1), {bucket_cap_mb = -1})
    assert.is_false(ok)
    assert.truthy(e:find("DistributedDataParallel: option bucket_cap_mb must be a number > 0, got -1", 1, true), e)
  end)

  it("ZeroRedundancyOptimizer steps exactly like the optimizer it wraps, with lr, schedulers and state", function()
    local a, b = mlp(2), mlp(2)
    local opts = {lr = 0.01, weight_decay = 0.1}
    local plain = dle.optim.AdamW(a:parameters(), opts)
    local zero = dle.optim.ZeroRedundancyOptimizer(dle.optim.AdamW, b:parameters(), opts)
    assert.are.same({0, 0, 0, 0}, zero.owners)
    assert.are.equal(0, zero:owner(3))
    local s1 = dle.optim.lr.step(plain, {step_size = 2, gamma = 0.5})
    local s2 = dle.optim.lr.step(zero, {step_size = 2, gamma = 0.5})
    local x, y = dle.randn(5, 4), dle.randint(1, 3, {5})
    local function train(model, opt, sched)
      train_step(model, opt, x, y)
      sched:step()
    end
    for _ = 1, 3 do train(a, plain, s1); train(b, zero, s2) end
    same_params(a, b)
    assert.are.equal(plain.lr, zero.lr)
    zero.lr = 0.02
    assert.are.equal(0.02, zero.param_groups[1].lr)
    plain.lr = 0.02
    -- a state_dict round trip (through a file) continues identically
    local path = os.tmpname()
    dle.save(path, zero:state_dict())
    local sd = dle.load(path)
    os.remove(path)
    assert.are.equal(1, sd.world_size)
    assert.are.equal(0, sd.rank)
    assert.are.equal(3, sd.state[1].step)
    local zero2 = dle.optim.ZeroRedundancyOptimizer(dle.optim.AdamW, b:parameters(), opts)
    zero2:load_state_dict(sd)
    assert.are.equal(0.02, zero2.lr)
    train_alike(a, plain, b, zero2, 2, x, y)
    zero2:zero_grad()
    assert.is_nil(b:parameters()[1].grad)
  end)

  it("ZeroRedundancyOptimizer: bad arguments and foreign state dicts raise errors naming it", function()
    local p = mlp(1):parameters()
    local Z = dle.optim.ZeroRedundancyOptimizer
    assert.truthy(err(Z, "Adam", p):find("ZeroRedundancyOptimizer: opt_class must be an optimizer class", 1, true))
    assert.truthy(err(Z, dle.optim.Adam, {}):find("ZeroRedundancyOptimizer: Adam: params must be a non-empty list", 1,
                                                  true))
    assert.truthy(err(Z, dle.optim.Adam, p, {lr = -1}):find("ZeroRedundancyOptimizer: Adam: invalid lr -1", 1, true))
    local z = Z(dle.optim.Adam, p)
    assert.truthy(err(function() z.lr = "fast" end):find("ZeroRedundancyOptimizer: lr must be a non-negative number", 1,
                                                         true))
    assert.truthy(err(z.load_state_dict, z, {}):find("ZeroRedundancyOptimizer:load_state_dict: expected a table", 1,
                                                     true))
    local sd = z:state_dict()
    sd.world_size = 2
    assert.truthy(err(z.load_state_dict, z, sd):find("a shard loads only on its own rank", 1, true))
    assert.truthy(err(z.owner, z, 99):find("ZeroRedundancyOptimizer:owner: no param 99", 1, true))
  end)

  it("ZeroRedundancyOptimizer:consolidate_state_dict gives exactly the plain optimizer's state_dict, until a step " ..
      "or a load", function()
    local a, b, c = mlp(2), mlp(2), mlp(2)
    local opts = {lr = 0.01, amsgrad = true}
    local plain = dle.optim.Adam(a:parameters(), opts)
    local zero = dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, b:parameters(), opts)
    local x, y = dle.randn(5, 4), dle.randint(1, 3, {5})
    train_alike(a, plain, b, zero, 2, x, y)
    assert.truthy(zero:state_dict().owners, "a shard before consolidating")
    zero:consolidate_state_dict()
    local sd, expected = zero:state_dict(), plain:state_dict()
    assert.is_nil(common.state_difference(sd, expected))
    -- a plain Adam (built with another lr: the state's wins) loads it and continues like the ZeRO
    c:load_state_dict(b:state_dict())
    local plain2 = dle.optim.Adam(c:parameters(), {lr = 1})
    plain2:load_state_dict(sd)
    train_alike(b, zero, c, plain2, 2, x, y)
    assert.is_nil(common.state_difference(sd, expected), "a copy: the steps did not change it")
    assert.truthy(zero:state_dict().owners, "the step dropped the consolidation")
    zero:consolidate_state_dict(0)
    zero:load_state_dict(zero:state_dict())
    assert.truthy(zero:state_dict().owners, "so does a load")
  end)

  it("ZeroRedundancyOptimizer:load_state_dict takes a plain optimizer's state and continues like it", function()
    local a, b = mlp(4), mlp(4)
    local opts = {lr = 0.05, momentum = 0.9}
    local plain = dle.optim.SGD(a:parameters(), opts)
    local x, y = dle.randn(5, 4), dle.randint(1, 3, {5})
    for _ = 1, 2 do train_step(a, plain, x, y) end
    b:load_state_dict(a:state_dict())
    local zero = dle.optim.ZeroRedundancyOptimizer(dle.optim.SGD, b:parameters(), opts)
    zero:load_state_dict(plain:state_dict())
    train_alike(a, plain, b, zero, 2, x, y)
  end)

  it("ZeroRedundancyOptimizer checkpoints: errors name the function, the value, the param and the shapes", function()
    local Z, Linear, ReLU = dle.optim.ZeroRedundancyOptimizer, dle.nn.Linear, dle.nn.ReLU
    local x, y = dle.randn(5, 4), dle.randint(1, 3, {5})
    -- a plain Adam's state_dict after one step of model (params grouped as groups says)
    local function trained_state(model, groups)
      local opt = dle.optim.Adam(groups or model:parameters())
      train_step(model, opt, x, y)
      return opt:state_dict()
    end
    local model = mlp(1)
    local z = Z(dle.optim.Adam, model:parameters())
    local fn = "ZeroRedundancyOptimizer:consolidate_state_dict: "
    assert.truthy(err(z.consolidate_state_dict, z, 1):find(fn .. "to 1 is not a rank (ranks are 0..0)", 1, true))
    assert.truthy(err(z.consolidate_state_dict, z, -1):find(fn .. "to -1 is not a rank", 1, true))
    assert.truthy(err(z.consolidate_state_dict, z, 0.5):find(fn .. "to must be an integer, got number 0.5", 1, true))
    assert.truthy(err(z.consolidate_state_dict, z, {}):find(fn .. "to must be an integer, got table", 1, true))
    fn = "ZeroRedundancyOptimizer:load_state_dict: "
    local bigger = dle.nn.Sequential(Linear(4, 6), ReLU(), Linear(6, 2), ReLU(), Linear(2, 2))
    assert.truthy(err(z.load_state_dict, z, trained_state(bigger))
      :find(fn .. "the state has 6 params, this optimizer 4", 1, true))
    local wider = dle.nn.Sequential(Linear(4, 7), ReLU(), Linear(7, 2))
    assert.truthy(err(z.load_state_dict, z, trained_state(wider))
      :find(fn .. "the state of param 1 has exp_avg of shape {7,4}, the param {6,4}", 1, true))
    -- the same params grouped otherwise
    local p = mlp(1):parameters()
    local split = trained_state(mlp(1), {{params = {p[1], p[2]}}, {params = {p[3], p[4]}}})
    assert.truthy(err(z.load_state_dict, z, split):find(fn .. "the state has 2 param groups, this optimizer 1", 1,
                                                        true))
    local z2 = Z(dle.optim.Adam, {{params = {model:parameters()[1]}}, {params = {table.unpack(model:parameters(), 2)}}})
    assert.truthy(err(z2.load_state_dict, z2, split):find(fn .. "param group 1 has 2 params in the state, 1 here", 1,
                                                          true))
    -- state for a param that does not exist, or that the class does not keep
    local sd = trained_state(model)
    sd.state[5] = sd.state[1]
    assert.truthy(err(z.load_state_dict, z, sd):find(fn .. "state for param 5, which does not exist (4 params)", 1,
                                                     true))
    sd.state[5] = nil
    sd.state[2].momentum_buffer = sd.state[2].exp_avg
    assert.truthy(err(z.load_state_dict, z, sd):find(fn
        .. "the state of param 2 holds 'momentum_buffer', which Adam does not keep", 1, true))
    -- a state consolidation cannot send fails on every rank, naming the param and its owner
    sd.state[2].momentum_buffer = nil
    z:load_state_dict(sd)
    z.optim.state[3].step = "three"
    assert.truthy(err(z.consolidate_state_dict, z)
      :find("consolidate_state_dict: the state of param 3 (on rank 0) has step string, not a number", 1, true))
    -- a plain optimizer refuses a shard: it would load without the other ranks' state
    local plain = dle.optim.Adam(model:parameters())
    assert.truthy(err(plain.load_state_dict, plain, Z(dle.optim.Adam, model:parameters()):state_dict())
      :find("Adam: load_state_dict: the state is rank 0's shard of a ZeroRedundancyOptimizer in a world of 1", 1, true))
  end)

  it("ZeroRedundancyOptimizer.partition is greedy by size and deterministic", function()
    local P = dle.optim.ZeroRedundancyOptimizer.partition
    assert.are.same({0, 1, 1, 1}, P({40, 8, 24, 3}, 2))
    assert.are.same({0, 1, 2, 0, 1}, P({10, 10, 10, 5, 5}, 3))
    assert.are.same({0, 0}, P({1, 2}, 1))
  end)
end)

describe("examples/dist/tp_overhead.lua", function()
  it("times the tensor-parallel TransformerBlock against the dense one on 1 rank and prints the overhead", function()
    local out, ok = sh(ENV .. "lua5.4 examples/dist/tp_overhead.lua --d 32 --heads 4 --batch 2 --seq 8 --rounds 1")
    assert.is_true(ok, out)
    assert.truthy(out:find("dense +%d+%.%d+ ms"), out)
    local differ = out:match("tensor parallel +%d+%.%d+ ms  %(1 rank; outputs differ by (%S+)%)")
    assert.is_true(tonumber(differ) < 1e-5, out)
    assert.truthy(out:find("overhead +[-+]%d+%.%d %%"), out)
  end)
end)

describe("dle.autograd.register_backward_hook", function()
  local x = dle.tensor({1, 2, 3}, {requires_grad = true})

  it("runs after t:backward() and dle.backward() with the gradients accumulated, until removed", function()
    local seen = {}
    local h = dle.autograd.register_backward_hook(function() seen[#seen + 1] = x.grad:totable() end)
    x.grad = nil;
    (x * x):sum():backward()
    dle.backward({(x * 2):sum()})
    h:remove()
    h:remove();
    (x * x):sum():backward()
    assert.are.same({{2, 4, 6}, {4, 6, 8}}, seen)
  end)

  it("does not run after dle.grad, nor for the inner backward of a checkpoint", function()
    local n = 0
    local h = dle.autograd.register_backward_hook(function() n = n + 1 end)
    dle.grad((x * x):sum(), {x})
    assert.are.equal(0, n)
    local y = dle.checkpoint(function(v) return (v:sin() * v):sum() end, x)
    y:backward()
    h:remove()
    assert.are.equal(1, n)
  end)

  it("a failing hook makes backward raise an error naming it; a non-function is refused", function()
    local h = dle.autograd.register_backward_hook(function() error("hook broke") end)
    local ok, e = pcall(function() (x * 3):sum():backward() end)
    h:remove()
    assert.is_false(ok)
    assert.truthy(tostring(e):find("backward: a backward hook failed: .*hook broke"), e)
    ok, e = pcall(dle.autograd.register_backward_hook, 3)
    assert.is_false(ok)
    assert.truthy(e:find("register_backward_hook: fn must be a function, got number 3", 1, true), e)
    -- backward errors pass through unchanged (reported at the caller's line)
    ok, e = pcall(function() dle.tensor({1, 2}):backward() end)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("^tests/dist_spec.lua:%d+: backward: output 1"), e)
  end)
end)

-- ---------------------------------------------------------------- across processes

local NP = 2
local missing = not H.have_command("mpirun") and "mpirun not found: Debian package openmpi-bin"
  or not select(1, dle.dist.is_available()) and "dle was built without MPI (libopenmpi-dev)" or nil

-- Runs `prog` on np (default NP) ranks with mpirun (at most 120 s); returns output, success, seconds. Under
-- scripts/test --asan, LD_PRELOAD (the sanitizer runtime) goes to the ranks, not to mpirun, and
-- the ranks run without LeakSanitizer, whose tracer crashes on Open MPI's threads at exit (ASan's
-- memory checks stay on; this process, an MPI singleton, keeps leak checking).
local function mpirun(prog, env, np)
  local preload, asan = os.getenv("LD_PRELOAD"), os.getenv("ASAN_OPTIONS")
  local extra = ""
  if preload then
    extra = " -x LD_PRELOAD=" .. q(preload) .. " -x ASAN_OPTIONS=" .. q((asan or "") .. ":detect_leaks=0")
  end
  return sh(ENV .. "env -u LD_PRELOAD " .. (env or "") .. " timeout 120 mpirun --allow-run-as-root "
    .. "--oversubscribe --bind-to none -np " .. (np or NP) .. extra .. " " .. prog)
end

-- Runs tests/dist/<worker>.lua on NP ranks (env: "VAR=value ..." for them).
local function run_worker(worker, env) return mpirun("lua5.4 tests/dist/" .. worker .. ".lua", env) end

local cache = {}
-- The parsed report of a worker (run once), checked to have finished on every rank.
local function report(worker, env)
  if not cache[worker] then
    local out, ok, secs = run_worker(worker, env)
    cache[worker] = {out = out, ok = ok, secs = secs, r = common.parse(out)}
  end
  local c = cache[worker]
  assert.is_true(c.ok, c.out)
  for rank = 0, NP - 1 do
    assert.are.equal("1", c.r[rank] and c.r[rank].done, "rank " .. rank .. " did not finish:\n" .. c.out)
  end
  return c.r, c.out
end

local function numbers(s)
  local v = {}
  for x in s:gmatch("[^,]+") do v[#v + 1] = x == "true" or (x ~= "false" and tonumber(x)) end
  return v
end

local function it_mpi(name, fn)
  if missing then pending(name .. " (" .. missing .. ")") else it(name, fn) end
end

describe("dle.dist across " .. NP .. " MPI processes", function()
  it_mpi("all_reduce sum/max/min/prod/mean on rank-dependent data in every dtype", function()
    local r, out = report("collectives")
    for rank = 0, NP - 1 do
      assert.are.equal(tostring(NP), r[rank].world)
      for _, dt in ipairs(common.DTYPES) do
        local ops = {"sum", "max", "min", "prod"}
        if common.FLOATS[dt] then ops[#ops + 1] = "mean" end
        for _, op in ipairs(ops) do
          local lists = {}
          for k = 0, NP - 1 do lists[k + 1] = common.values(dt, k) end
          local expect = common.reduce(lists, op, dt)
          assert.are.same(expect, numbers(r[rank][dt .. "." .. op]), "rank " .. rank .. " " .. dt .. " " .. op)
        end
      end
      local sum = common.reduce({common.values("float32", 0), common.values("float32", 1)}, "sum")
      assert.are.same(sum, numbers(r[rank].default_op))
      assert.are.same(common.reduce({common.values("float32", 0), common.values("float32", 1)}, "mean"),
                      numbers(r[rank].avg))
    end
    assert.is_nil(out:find("not_self", 1, true), "all_reduce returns its tensor:\n" .. out)
    -- float16/bfloat16 values off the integer grid: the rounded sum of the two ranks' values
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local base = dle.tensor({0.1, 1 / 3, 1000.7, -2.2e-3})
      local expect = ((base * 1):to(dt):float() + (base * 2):to(dt):float()):to(dt):float()
      for rank = 0, NP - 1 do
        assert.are.same(numbers(common.format(expect:totable())), numbers(r[rank]["fraction." .. dt]), dt)
      end
    end
  end)

  it_mpi("all_gather in every dtype into transposed slots; reduce_scatter sum/max/mean and int32/float16/bool",
         function()
    local r = report("exchange")
    for rank = 0, NP - 1 do
      for _, dt in ipairs(common.DTYPES) do
        local expect = {}
        for k = 0, NP - 1 do
          for _, v in ipairs(common.values(dt, k)) do expect[#expect + 1] = v end
        end
        assert.are.same(expect, numbers(r[rank]["all_gather." .. dt]), rank .. " " .. dt)
      end
      -- in_list[i] = {10 i + rank, -rank, i}: rank r gets its block r + 1 reduced over the ranks
      local i = rank + 1
      assert.are.same({20 * i + 1, -1, 2 * i}, numbers(r[rank]["reduce_scatter.sum"]))
      assert.are.same({10 * i + 1, 0, i}, numbers(r[rank]["reduce_scatter.max"]))
      assert.are.same({10 * i + 0.5, -0.5, i}, numbers(r[rank]["reduce_scatter.mean"]))
      for _, dt in ipairs({"int32", "float16"}) do
        assert.are.same({2 * i + 1, 2, 0, 1}, numbers(r[rank]["reduce_scatter_dtype." .. dt]), dt)
      end
      assert.are.same({true, true, false, true}, numbers(r[rank]["reduce_scatter_dtype.bool"]))
    end
  end)

  it_mpi("send and recv by tag and from any rank, into a non-contiguous view; groups with their own ranks",
         function()
    local r = report("exchange")
    assert.are.same({0.5, 1.5}, numbers(r[1].tag2))
    assert.are.same({1, 2, 3, 4, 5, 6}, numbers(r[1].tag1))
    assert.are.equal("0", r[1].from)
    assert.are.same({1, 4, 2, 5, 3, 6}, numbers(r[0].answer))
    assert.are.equal("1", r[0].answer_from)
    -- new_group({1}) and new_group({1, 0}): ranks in the group, -1 outside it
    assert.are.same({"-1", "1", "1"}, {r[0].solo_rank, r[0].solo_size, r[0].rev_rank})
    assert.are.same({"0", "1", "0"}, {r[1].solo_rank, r[1].solo_size, r[1].rev_rank})
    assert.are.equal("5", r[1].solo_sum)
    for rank = 0, NP - 1 do
      assert.are.same({1, 0}, numbers(r[rank].rev_gather), "slots in the group's order")
      assert.are.same({8}, numbers(r[rank].rev_broadcast), "root: world rank 1")
      local bad = r[rank]
      assert.truthy(bad.bad_slots:find("all_gather: out_list must hold 2 tensors (one per rank), got 1", 1, true))
      assert.truthy(bad.bad_shape:find("all_gather: out_list[2] is float32 {3}, the tensor is float32 {2}", 1, true))
      assert.truthy(bad.bad_dst:find("send: dst 5 is not a rank (ranks are 0..1)", 1, true))
      assert.truthy(bad.bad_group:find("barrier: group must be a group from dle.dist.new_group, got number", 1, true))
      assert.truthy(bad.bad_rank_list:find("new_group: rank 0 is listed twice", 1, true))
      assert.truthy(bad.bad_tag:find("send: tag must be in 0..32767, got -1", 1, true))
      assert.truthy(bad.bad_option:find("barrier: unknown option 'grup'", 1, true), bad.bad_option)
    end
    assert.truthy(r[0].not_member:find("all_reduce: this rank is not a member of the group", 1, true))
  end)

  it_mpi("tensor_parallel Column/RowLinear and the split transformer block equal the dense ones (float64, all grads)",
         function()
    local r = report("tp")
    for rank = 0, NP - 1 do
      local v = r[rank]
      for _, k in ipairs({"mlp_y", "mlp_gx", "mlp_gw1", "mlp_gb1", "mlp_gw2", "mlp_gb2", "column_y", "column_gx",
                          "row_y", "row_gx", "row_gw", "block_y", "block_gx", "block_gqkv", "block_gqkv_b",
                          "block_gproj", "block_gfc1", "block_gfc2", "block_gln"}) do
        assert.is_true(tonumber(v[k]) < 1e-12, string.format("rank %d %s: %s", rank, k, v[k]))
      end
      assert.truthy(v.bad_heads:find("Attention: heads (13) must be a multiple of the 2 ranks", 1, true))
      assert.are.equal("6x8 6x6", v.shapes, "each rank keeps half the rows of W1 and half the columns of W2")
      assert.truthy(v.bad_split:find("ColumnLinear: out_features (7) must be a multiple of the 2 ranks", 1, true))
      assert.truthy(v.bad_input:find("RowLinear: input must have 6 features (this rank's share), got shape {2,12}",
                                     1, true))
    end
  end)

  it_mpi("tensor_parallel on 4 ranks: the split MLP and transformer block equal the dense ones", function()
    local out, ok = mpirun("lua5.4 tests/dist/tp.lua", nil, 4)
    assert.is_true(ok, out)
    local r = common.parse(out)
    for rank = 0, 3 do
      assert.are.equal("1", r[rank] and r[rank].done, "rank " .. rank .. " did not finish:\n" .. out)
      for _, k in ipairs({"mlp_y", "mlp_gx", "mlp_gw1", "mlp_gw2", "column_y", "row_y", "row_gw", "block_y",
                          "block_gx", "block_gqkv", "block_gproj", "block_gfc1", "block_gfc2"}) do
        assert.is_true(tonumber(r[rank][k]) < 1e-12, string.format("rank %d %s: %s", rank, k, r[rank][k]))
      end
      assert.are.equal("3x8 6x3", r[rank].shapes, "a quarter of W1's rows and of W2's columns")
    end
  end)

  it_mpi("pipeline gpipe and 1f1b over 1, 2, 4 microbatches give one process's loss and gradients", function()
    local r = report("pipe")
    for _, schedule in ipairs({"gpipe", "1f1b"}) do
      for _, m in ipairs({1, 2, 4}) do
        local key = schedule .. "." .. m
        for rank = 0, NP - 1 do
          local worst = r[rank]["grad." .. key]
          assert.is_true(tonumber(worst) < 1e-12, rank .. " " .. key .. ": " .. worst)
          assert.is_true(math.abs(tonumber(r[rank]["bubble." .. key]) - 1 / (m + 1)) < 1e-12, "(p - 1) / (m + p - 1)")
        end
        assert.is_true(tonumber(r[1]["loss." .. key]) < 1e-12, key .. " loss on the last rank")
        assert.are.equal("true", r[0]["loss_nil." .. key], "no loss on the first rank")
      end
    end
    local split = "does not split into 3 equal microbatches"
    assert.truthy(r[0].bad_split:find("pipeline:step: x of shape {8,6} " .. split, 1, true))
    assert.truthy(r[1].bad_split:find("pipeline:step: y of shape {8} " .. split, 1, true))
    assert.truthy(r[0].bad_stages:find("pipeline: stages must hold one module per rank (2), got 1", 1, true))
    assert.truthy(r[0].bad_schedule:find('pipeline: schedule must be "1f1b" or "gpipe", got zigzag', 1, true))
    assert.truthy(r[1].bad_header:find("pipeline: rank 0 sent a malformed tensor header", 1, true), r[1].bad_header)
  end)

  it_mpi("all_reduce{async_op = true} returns a Work; after wait() the tensor holds the sum or mean, through a " ..
         "transposed view too", function()
    local r = report("collectives")
    for rank = 0, NP - 1 do
      assert.are.equal("dle.dist.Work", r[rank].async_type)
      assert.are.same(common.reduce({common.values("float32", 0), common.values("float32", 1)}, "sum"),
                      numbers(r[rank].async_sum))
      assert.are.same({1.5, 3, 4.5, 6, 7.5, 9}, numbers(r[rank].async_mean_t))
      assert.are.equal("true", r[rank].async_done)
    end
  end)

  it_mpi("all_reduce writes through non-contiguous views (transposed, narrowed) in place", function()
    local r = report("collectives")
    for rank = 0, NP - 1 do
      for _, dt in ipairs({"float32", "float16", "bfloat16", "int64"}) do
        local expect = common.reduce({common.values(dt, 0), common.values(dt, 1)}, "sum")
        assert.are.same(expect, numbers(r[rank]["transposed." .. dt]), dt)
        assert.are.equal("true", r[rank]["transposed_self." .. dt])
      end
      -- columns 2..3 of {{1,2,3,4},{5,6,7,8}} * (rank + 1), max over ranks; the rest untouched
      local k = rank + 1
      assert.are.same({k, 4, 6, 4 * k, 5 * k, 12, 14, 8 * k}, numbers(r[rank].narrowed))
    end
  end)

  it_mpi("broadcast from root 1 in every dtype and through a transposed view; barrier waits", function()
    local r = report("collectives")
    for rank = 0, NP - 1 do
      for _, dt in ipairs(common.DTYPES) do
        assert.are.same(common.values(dt, 1), numbers(r[rank]["broadcast." .. dt]), rank .. " " .. dt)
      end
      assert.are.same({11, 22, 33, 44, 55, 66}, numbers(r[rank].broadcast_transposed))
      assert.are.same({3, 3}, numbers(r[rank].broadcast_default_root))
      assert.truthy(r[rank].bad_root:find("broadcast: root 2 is not a rank (ranks are 0..1)", 1, true))
      assert.truthy(r[rank].bad_op:find("all_reduce: unknown op 'median'", 1, true))
    end
    -- rank 1 reached the barrier 0.3 s late: rank 0 waited for it
    assert.is_true(tonumber(r[0].barrier_wait) >= 0.2, r[0].barrier_wait)
  end)

  it_mpi("DistributedDataParallel: rank 0's init everywhere, identical parameters, equal to one process on the " ..
      "whole batch", function()
    local r = report("ddp")
    for rank = 0, NP - 1 do
      assert.are.equal(0, tonumber(r[rank].init_diff))
      assert.are.equal("true", r[rank].same_params)
      assert.are.equal("1.bias 1.weight 3.bias 3.weight", r[rank].state_keys)
      assert.is_true(tonumber(r[rank].train_diff) < 1e-5, r[rank].train_diff)
    end
    assert.are.equal(r[0].train_params, r[1].train_params)
  end)

  it_mpi("DistributedDataParallel: gradient accumulation, with and without no_sync, averages like one step", function()
    local r = report("ddp")
    for rank = 0, NP - 1 do
      assert.is_true(tonumber(r[rank].accum_diff) < 1e-5, r[rank].accum_diff)
      assert.is_true(tonumber(r[rank].no_sync_diff) < 1e-5, r[rank].no_sync_diff)
    end
    -- inside no_sync each rank keeps its own gradient; after the synchronised backward they agree,
    -- and agree with accumulation synchronised at every backward
    assert.are_not.equal(r[0].local_grad, r[1].local_grad)
    assert.are.equal(r[0].no_sync_grad, r[1].no_sync_grad)
    local a, b = numbers(r[0].accum_grad), numbers(r[0].no_sync_grad)
    assert.are.equal(#a, #b)
    for i = 1, #a do assert.is_true(close_to(a[i], b[i], 1e-6), i .. ": " .. a[i] .. " vs " .. b[i]) end
  end)

  it_mpi("DistributedDataParallel: with overlap, buckets start their all_reduce during backward once their module " ..
         "is done, in the same order on every rank when a module runs on one rank only; without (the CPU " ..
         "default), all start after backward, with the same averages; parameters of 256 KB or more are " ..
         "reduced in place in their .grad", function()
    local r = report("ddp")
    -- one bucket per parameter: c's 2 and b's 2 on rank 0, c's 2 on rank 1 (b did not run there)
    assert.are.equal("4", r[0].overlap_early)
    assert.are.equal("2", r[1].overlap_early)
    assert.are.equal("0", r[0].late_early)
    assert.are.equal("0", r[1].late_early)
    -- a.weight, b.weight (260x260 floats) alone; the biases and c share one bucket
    assert.are.equal("2", r[0].alone_buckets)
    assert.are.equal("3", r[0].buckets)
    for rank = 0, NP - 1 do
      assert.is_true(tonumber(r[rank].alone_diff) < 1e-6, r[rank].alone_diff)
    end
    for rank = 0, NP - 1 do
      assert.is_true(tonumber(r[rank].overlap_diff) < 1e-6, r[rank].overlap_diff)
    end
  end)

  it_mpi("DistributedDataParallel: unused parameters, buffers, and models that differ across ranks", function()
    local r = report("ddp")
    for rank = 0, NP - 1 do
      -- b's gradient (2 on rank 0, none on rank 1) averages to 1; a's (2 and 4) to 3; c has none
      assert.are.same({1, 1, 1}, numbers(r[rank].unused_b_grad))
      assert.are.same({3, 3, 3}, numbers(r[rank].unused_a_grad))
      assert.are.equal("nil", r[rank].unused_c_grad)
      -- a 260x260 weight (a bucket of its own) used nowhere: still nil after two steps; the used
      -- weight's gradient (2 (rank + 1) per element) averages to 3
      assert.are.equal("nil", r[rank].spare_grad)
      assert.are.same({3, 3, 3}, numbers(r[rank].spare_used_grad))
      -- rank 0's buffer (1) at construction; before a training forward rank 0's again (7)
      assert.are.same({1, 1}, numbers(r[rank].buffer_init))
      assert.are.same({7, 7}, numbers(r[rank].buffer_forward))
      assert.truthy(r[rank].mismatch:find("DistributedDataParallel: the model differs across ranks", 1, true),
                    r[rank].mismatch)
    end
  end)

  it_mpi("ZeroRedundancyOptimizer(Adam) matches plain Adam, each rank holding its own shard of the state", function()
    local r = report("zero")
    for rank = 0, NP - 1 do
      assert.is_true(tonumber(r[rank].zero_diff) < 1e-5, r[rank].zero_diff)
      assert.are.same({0, 1, 1, 1}, numbers(r[rank].owners))
      assert.are.equal(0.025, tonumber(r[rank].lr))
      assert.are.equal("6", r[rank].state_steps)
      assert.truthy(r[rank].wrong_rank:find("a shard loads only on its own rank", 1, true), r[rank].wrong_rank)
    end
    assert.are.equal(r[0].zero_params, r[1].zero_params)
    assert.are.equal("1", r[0].state_keys)
    assert.are.equal("2,3,4", r[1].state_keys)
  end)

  -- the consolidated checkpoint tests/dist/zero_checkpoint.lua writes (rank 0), and its report
  local checkpoint = os.tmpname()
  teardown(function() os.remove(checkpoint) end)
  local function checkpoint_report()
    return report("zero_checkpoint", "DLE_ZERO_CHECKPOINT=" .. q(checkpoint))
  end

  it_mpi("ZeroRedundancyOptimizer:consolidate_state_dict: plain Adam's exact state on rank `to` (1, then 0), shards " ..
      "elsewhere and after a step", function()
    local r = checkpoint_report()
    for rank = 0, NP - 1 do
      assert.are.equal("0", r[rank].trained_diff)
      assert.are.equal(rank == 1 and "full" or "shard", r[rank].to1_kind)
      assert.are.equal(rank == 0 and "full" or "shard", r[rank].to0_kind)
      assert.are.equal("shard", r[rank].after_step_kind)
    end
    assert.are.equal("same", r[1].to1_vs_plain)
    assert.are.equal("same", r[0].to0_vs_plain)
  end)

  it_mpi("ZeroRedundancyOptimizer:consolidate_state_dict gathers SGD, RMSprop, Adagrad and AdamW state, and params " ..
      "without any", function()
    local r = checkpoint_report()
    for _, cls in ipairs({"SGD", "RMSprop", "Adagrad", "AdamW"}) do
      assert.are.equal("same", r[1]["class." .. cls], cls)
    end
  end)

  it_mpi("a consolidated 2-rank checkpoint resumes in one process, in plain Adam and in ZeRO: the next step is the " ..
      "2 ranks', bit for bit", function()
    local r = checkpoint_report()
    local ck = dle.load(checkpoint)
    dle.dist.init()   -- a world of one here
    -- the parameters after one step from the checkpoint with make_opt(params), in one thread
    local function resumed(make_opt)
      local model = common.mlp(99)
      model:load_state_dict(ck.model)
      local opt = make_opt(model:parameters())
      opt:load_state_dict(ck.optim)
      local X, Y = common.batch(0, 1)
      local threads = dle.get_num_threads()
      dle.set_num_threads(1)
      local ok, e = pcall(common.train_step, model, opt, X, Y)
      dle.set_num_threads(threads)
      assert(ok, e)
      return common.format(common.flat_params(model))
    end
    local plain = resumed(function(p) return dle.optim.Adam(p, common.ADAM) end)
    assert.are.equal(r[0].params_step4, plain)
    local zero = resumed(function(p)
      return dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, p, common.ADAM)
    end)
    assert.are.equal(r[0].params_step4, zero)
  end)

  it_mpi("a consolidated checkpoint, or a plain Adam's state, resumes ZeRO on 2 ranks exactly as uninterrupted " ..
         "training", function()
    local r = checkpoint_report()
    for rank = 0, NP - 1 do
      assert.are.equal("0.025", r[rank].resumed_lr)
      assert.are.equal("0", r[rank].resumed_diff)
      assert.are.equal("0", r[rank].plain_resumed_diff)
      assert.are.equal("0", r[rank].plain_resumed_vs_ref)
    end
  end)

  it_mpi("ZeroRedundancyOptimizer checkpoint errors on 2 ranks: a bad `to`, another rank's shard, a full state of " ..
      "other shapes", function()
    local r = checkpoint_report()
    for rank = 0, NP - 1 do
      assert.truthy(r[rank].bad_to:find("ZeroRedundancyOptimizer:consolidate_state_dict: to 2 is not a rank (ranks " ..
          "are 0..1)", 1, true), r[rank].bad_to)
      assert.truthy(r[rank].wrong_rank:find(string.format("ZeroRedundancyOptimizer:load_state_dict: the state is " ..
          "rank %d's "
        .. "shard of a world of 2; this is rank %d of 2 (a shard loads only on its own rank", 1 - rank, rank), 1, true),
            r[rank].wrong_rank)
      assert.truthy(r[rank].bad_shape:find("ZeroRedundancyOptimizer:load_state_dict: the state of param 3 has " ..
          "exp_avg of shape {2,2}, the param {3,8}", 1, true),
        r[rank].bad_shape)
    end
  end)

  -- tests/dist/zero_stages.lua on np ranks: "save" (np > 1: with the equality checks) writes the
  -- checkpoints of np ranks into one directory, then loads every one there; "load" only loads.
  -- Runs in the order the tests need them (1, 2, 4 ranks save; then 1 and 2 load what 4 saved).
  local zero_dir, zero_runs = nil, {}
  teardown(function() if zero_dir then os.execute("rm -rf " .. q(zero_dir)) end end)
  local function zero_stages(np, phase)
    local key = np .. phase
    if not zero_runs[key] then
      zero_dir = zero_dir or H.tmpdir()
      local env = "DLE_ZERO_DIR=" .. q(zero_dir) .. (phase == "save" and " DLE_ZERO_SAVE=1" or "")
        .. (phase == "save" and np > 1 and " DLE_ZERO_EQUAL=1" or "")
      local out, ok = mpirun("lua5.4 tests/dist/zero_stages.lua", env, np)
      assert.is_true(ok, out)
      local r = common.parse(out)
      for rank = 0, np - 1 do
        assert.are.equal("1", r[rank] and r[rank].done, "rank " .. rank .. " did not finish:\n" .. out)
      end
      zero_runs[key] = r
    end
    return zero_runs[key]
  end
  local function zero_equal_runs()
    zero_stages(1, "save")
    return {[2] = zero_stages(2, "save"), [4] = zero_stages(4, "save")}
  end
  -- f(values, where) for each rank's report of the 2- and 4-rank equality runs
  local function each_equal_rank(f)
    for np, r in pairs(zero_equal_runs()) do
      for rank = 0, np - 1 do f(r[rank], string.format("%d ranks, rank %d", np, rank)) end
    end
  end
  -- a reported max difference from the reference, at most 1e-6
  local function assert_equal_run(d, what)
    assert.is_true(tonumber(d) <= 1e-6, what .. ": " .. tostring(d))
  end

  it_mpi("ZeroRedundancyOptimizer stages 1, 2, 3 on 2 and 4 ranks equal plain AdamW in one process (1e-6), in " ..
         "float32 and in bfloat16 with float32 masters, over 75 params (no multiple of 2 or 4)", function()
    each_equal_rank(function(v, where)
      assert.are.equal("75", v.numel)
      for _, dtype in ipairs({"float32", "bfloat16"}) do
        for stage = 1, 3 do
          assert_equal_run(v[string.format("equal.%s.%d", dtype, stage)],
                           string.format("%s, %s stage %d", where, dtype, stage))
        end
      end
    end)
  end)

  it_mpi("ZeroRedundancyOptimizer stages 1 (with DDP), 2 and 3 average the ranks' gradients: SGD on each rank's " ..
         "share of the batch equals SGD on the whole batch (1e-6)", function()
    each_equal_rank(function(v, where)
      for stage = 1, 3 do assert_equal_run(v["split." .. stage], string.format("%s, stage %d", where, stage)) end
    end)
  end)

  it_mpi("ZeroRedundancyOptimizer stage 3: the model's fields are empty between calls, its state_dict full; a " ..
         "param list or stage 4 is refused", function()
    each_equal_rank(function(v)
      assert.are.equal("0", v.stage3_resident_numel)
      assert.are.equal("75", v.stage3_state_numel)
      assert.truthy(v.stage3_list:find("ZeroRedundancyOptimizer: stage 3 gathers the parameters into the modules "
        .. "that use them: pass the model (a dle.nn.Module) as params, got a list", 1, true), v.stage3_list)
      assert.truthy(v.bad_stage:find("ZeroRedundancyOptimizer: stage must be 1, 2 or 3, got 4", 1, true),
                    v.bad_stage)
    end)
  end)

  it_mpi("ZeroRedundancyOptimizer checkpoints: plain AdamW's and stage 1, 2, 3's saved on 1, 2 and 4 ranks each " ..
         "resume under plain AdamW and every stage on 1, 2 and 4 ranks, exactly as uninterrupted training", function()
    local expected = {}
    local function add(world)
      for saved = 0, 3 do
        for loaded = 0, 3 do expected[#expected + 1] = string.format("%d_%d>%d", world, saved, loaded) end
      end
    end
    -- each save run loads what the runs before it and itself saved; then 4 ranks' checkpoints
    -- load on 1 and 2
    for _, run in ipairs({{1, "save"}, {2, "save"}, {4, "save"}, {1, "load"}, {2, "load"}}) do
      local np, phase = run[1], run[2]
      if phase == "save" then add(np) end
      local r = zero_stages(np, phase)
      for rank = 0, np - 1 do
        assert.are.equal(table.concat(expected, ","), r[rank].resumed, np .. " ranks")
        assert.are.equal("0", r[rank].resumed_diff, np .. " ranks, rank " .. rank)
      end
    end
  end)

  it_mpi("examples/dist/zero_memory.lua: each rank's bytes of params, gradients and optimizer state after a step " ..
         "are the seeds' accounting within 10%, for stages 1, 2, 3 in float32 and bfloat16", function()
    local out, ok = mpirun("lua5.4 examples/dist/zero_memory.lua", nil, 2)
    assert.is_true(ok, out)
    local rows = 0
    for rank, stage, dtype, measured, seeds in out:gmatch(
        "rank (%d)  stage (%d)  (%S+) +%d+ params  measured +(%S+) MB  seeds +(%S+) MB") do
      rows = rows + 1
      local ratio = tonumber(measured) / tonumber(seeds)
      assert.is_true(math.abs(ratio - 1) <= 0.1, string.format("rank %s stage %s %s: %s MB measured, %s MB by the "
        .. "seeds' accounting", rank, stage, dtype, measured, seeds))
    end
    assert.are.equal(12, rows, out)
    -- stage 3 in float32 on 2 ranks: 16 bytes per parameter halved
    assert.truthy(out:find("stage 3  float32   1050624 params  measured    8.405 MB", 1, true), out)
  end)

  local fm = H.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
  local it_example = (missing or not fm) and function(name)
    pending(name .. " (" .. (missing or "Fashion-MNIST files absent: Debian package dataset-fashion-mnist") .. ")")
  end or it
  it_example("examples/fashion_mnist/ddp.lua trains on 2 ranks through scripts/dle; rank 0 reports", function()
    local logs = H.tmpdir()
    local out, ok = mpirun("scripts/dle examples/fashion_mnist/ddp.lua --epochs 1 --batch-size 64 --log-dir " .. logs,
                           "DLE_EXAMPLE_LIMIT=2000")
    assert.is_true(ok, out)
    -- rank 0's log: 31 steps of 32 + 32 images and the epoch's line; its curves
    local rows = H.check_run_files(logs .. "/fashion_mnist_ddp.jsonl", logs .. "/fashion_mnist_ddp.svg", "loss", 31)
    assert.are.equal(32, #rows)
    assert.truthy(out:find("2 ranks, 1000 training images each, batch 32 per rank", 1, true), out)
    local n, acc = 0, nil
    for a in out:gmatch("epoch 1  loss %S+  test accuracy (%S+)  %d+ samples/s") do
      n, acc = n + 1, a
    end
    assert.are.equal(1, n, "one report line, from rank 0:\n" .. out)
    assert.is_true(tonumber(acc) > 0.5, out)
  end)

  it_example("examples/dist/ddp_scaling.lua times 1 and 2 ranks through dle --nproc and prints their ratio", function()
    local out, ok = sh(ENV .. "DLE_EXAMPLE_LIMIT=2000 timeout 120 scripts/dle examples/dist/ddp_scaling.lua "
                       .. "--steps 5 --repeat 1 --batch 16")
    assert.is_true(ok, out)
    local one = tonumber(out:match("1 rank,  1 thread, batch 16: +(%d+) samples/s"))
    local two = tonumber(out:match("2 ranks, 1 thread each, batch 16 each: +(%d+) samples/s"))
    local ratio = tonumber(out:match("scaling: ([%d.]+)x the samples/s of 1 rank"))
    assert.is_true(one > 0 and two > 0, out)
    assert.is_true(math.abs(ratio - two / one) < 0.01, out)
  end)

  it_mpi("an error on one rank aborts every rank when the process group is a <close> variable", function()
    local out, ok, secs = run_worker("abort")
    assert.is_false(ok, out)
    assert.truthy(out:find("dle.dist: rank 1 failed, aborting every rank: " ..
                           "tests/dist/abort.lua:%d+: deliberate failure"), out)
    assert.is_nil(out:find("rank 0 finished", 1, true), out)
    assert.is_true(secs < 60, "took " .. secs .. " s")
  end)
end)
