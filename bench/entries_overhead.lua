--- bench/entries_overhead.lua — fixed costs: one op on 1-element tensors and a tiny autograd
-- graph (microseconds per call, vs PyTorch; one op also vs Lua's own cost of a finalized userdata, from
-- bench_ref), and start-up time of `scripts/dle -e 'require "dle"'`
-- (milliseconds of wall time, vs a bare `lua5.4 -e ''` and `python3 -c 'import torch'`), measured
-- as whole processes, so independent of the thread setting.
return function(ctx)
  local dle = ctx.dle
  local entries = {
    {
      key = "add_1elem",
      name = "c = a + b, 1-element float32",
      -- this VM's speed moves in phases of seconds (a Lua loop of tables with finalizers: 0.10 to
      -- 0.19 us each): 3 rounds alternating with the references, the median of their medians,
      -- each after a second without work (bench.lua, idle)
      unit = "us", scale = 1e6, target = {max_value = 0.2}, rounds = 3, idle_before = 1,
      dle = function()
        local a, b = dle.ones(1), dle.ones(1)
        return function() return a + b end
      end,
      refs = {{kind = "torch", label = "PyTorch", setup = "a = torch.ones(1)\nb = torch.ones(1)", body = "c = a + b"},
              -- what Lua 5.4 alone charges for the userdata (with finalizer) any new tensor needs
              {kind = "c", label = "Lua floor: 1 userdata + __gc", task = "lua_object:1"}},
    },
    {
      key = "autograd_tiny",
      name = "autograd y = x*w + x; y:sum():backward(), 1 element",
      unit = "us", scale = 1e6, target = {max_value = 3}, rounds = 3, idle_before = 1,
      dle = function()
        local x = dle.ones(1):requires_grad_()
        local w = dle.full({1}, 2):requires_grad_()
        return function()
          local y = x * w + x
          y:sum():backward()
        end
      end,
      refs = {{kind = "torch", label = "PyTorch",
               setup = "x = torch.ones(1, requires_grad=True)\nw = torch.full((1,), 2.0, requires_grad=True)",
               body = "y = x * w + x\ny.sum().backward()"}},
    },
  }

  -- A function running `cmd` (output discarded), raising an error when it fails.
  local function process(cmd)
    local full = cmd .. " >/dev/null 2>&1"
    return function()
      local ok, how, code = os.execute(full)
      if not ok then error(string.format("bench: `%s` failed (%s %s)", cmd, tostring(how), tostring(code)), 0) end
    end
  end
  local q = ctx.shell_quote
  local torch_ref = {kind = "lua", label = "python3 -c 'import torch'",
                     fn = function() return process(ctx.python .. " -c 'import torch'") end}
  if not ctx.torch_importable() then torch_ref.skipped = "PyTorch not importable by " .. ctx.python end
  entries[#entries + 1] = {
    key = "startup",
    name = "start-up: scripts/dle -e 'require \"dle\"'",
    unit = "ms", scale = 1e3, threads = "process", target = {max_value = 20},
    dle = function() return process(q(ctx.root .. "/scripts/dle") .. " -e 'require \"dle\"'") end,
    refs = {
      {kind = "lua", label = "lua5.4 -e ''", fn = function() return process("lua5.4 -e ''") end},
      torch_ref,
    },
  }
  return entries
end
