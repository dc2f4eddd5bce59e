-- soak_spec.lua — the short soak (tests/soak/soak.lua): training loops keep the process's resident
-- memory flat once warmed up, and the check notices a loop that keeps memory.
-- The full run is `tests/soak/run` (20,000 MLP steps, 2,000 GPT steps, 20,000 compiled steps).
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

local function have(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end
local data_ok = have("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")

-- Runs the soak script in a child process (its RSS is the loop's alone); returns the output and
-- whether it exited with success.
local function soak(env, args)
  local p = assert(io.popen(string.format("%s %q %q short %s 2>&1; echo \"exit=$?\"", env, root .. "/scripts/dle",
                                          root .. "/tests/soak/soak.lua", args)))
  local out = p:read("a")
  p:close()
  return out, out:match("exit=(%d+)%s*$") == "0"
end

describe("soak", function()
  it("2,000 MLP steps, 200 char-GPT steps and 2,000 compiled MLP steps keep RSS flat after warm-up", function()
    if not data_ok then pending("dataset-fashion-mnist is not installed") return end
    local out, ok = soak("", "mlp gpt compiled")
    for _, name in ipairs{"mlp", "gpt", "compiled"} do
      assert.is_truthy(out:find("\n?" .. name .. ": ok %("), name .. " not flat:\n" .. out)
      -- a series of 10 samples was taken
      local series = out:match(name .. ": %d+ steps, RSS %(MB%) every %d+ steps, warm%-up %d+ samples: ([%d. ]+)")
      assert.is_truthy(series, out)
      local n = select(2, series:gsub("%S+", ""))
      assert.are.equal(10, n)
    end
    assert.is_true(ok, out)
  end)

  it("a loop that keeps 8 KB per step is reported as a leak", function()
    if not data_ok then pending("dataset-fashion-mnist is not installed") return end
    local out, ok = soak("DLE_SOAK_LEAK=1", "mlp")
    assert.is_false(ok, out)
    assert.is_truthy(out:find("mlp: LEAK", 1, true), out)
  end)
end)
