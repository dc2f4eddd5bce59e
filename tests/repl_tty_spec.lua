-- repl_tty_spec.lua — the REPL as a user meets it: scripts/dle with no arguments on a terminal, a
-- detached tmux session (its own server socket, HOME a temporary directory so ~/.dle_history is
-- not the user's, INPUTRC=/dev/null so no personal readline settings apply). Keys are sent with
-- `tmux send-keys`; the screen is read with `tmux capture-pane -p` and polled until the expected
-- text appears or a deadline passes. Pending when tmux or lua-readline is not installed.
local H = require("helpers")
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

-- Quotes a string for the shell.
local q = H.shell_quote

-- Runs a shell command; returns its stdout and whether it exited 0.
local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  return out, p:close() == true
end

local has_tmux = os.execute("command -v tmux >/dev/null 2>&1") == true
local has_readline = os.execute("lua5.4 -e 'require \"readline\"' >/dev/null 2>&1") == true

local DEADLINE_S = 8   -- per expected text: far above what a loaded 2-core machine needs

-- Number of times `needle` occurs in `s` (plain text).
local function count(s, needle)
  local n, from = 0, 1
  while true do
    local i = s:find(needle, from, true)
    if not i then return n end
    n, from = n + 1, i + #needle
  end
end

-- Starts scripts/dle in a new tmux server and session; returns a terminal object. The caller
-- registers t:close() with finally().
local function terminal()
  local home = os.tmpname()
  os.remove(home)
  assert(os.execute("mkdir -p " .. q(home)))
  -- the server is started without LD_PRELOAD (an ASan run's libasan is for dle, not tmux)
  local preload = os.getenv("LD_PRELOAD")
  local tmux = "env -u LD_PRELOAD tmux -L " .. q("dle_tty_" .. home:match("[^/]+$"))
  local command = string.format("env HOME=%s INPUTRC=/dev/null %s %s", q(home),
                                preload and ("LD_PRELOAD=" .. q(preload)) or "", q(root .. "/scripts/dle"))
  local t = {}
  function t.close()
    sh(tmux .. " kill-server 2>/dev/null")
    sh("rm -rf " .. q(home))
  end
  -- the screen's text, wrapped lines joined, trailing blank lines dropped
  function t.screen()
    return (sh(tmux .. " capture-pane -p -J -t dle 2>&1"):gsub("\n+$", "\n"))
  end
  -- waits until `text` appears on the screen (`n` times: default 1); returns the screen
  function t.wait_for(text, n)
    local deadline = os.time() + DEADLINE_S
    local screen
    repeat
      screen = t.screen()
      if count(screen, text) >= (n or 1) then return screen end
      os.execute("sleep 0.05")
    until os.time() > deadline
    error(string.format("%q did not appear %d time(s) within %d s; the screen:\n%s", text, n or 1, DEADLINE_S,
                        screen), 2)
  end
  -- types text literally
  function t.type(text) assert(select(2, sh(tmux .. " send-keys -t dle -l " .. q(text)))) end
  -- presses keys by tmux's names: "Enter", "Tab", "Up", "C-u"
  function t.press(...)
    for _, key in ipairs({...}) do assert(select(2, sh(tmux .. " send-keys -t dle " .. q(key)))) end
  end
  -- types a line and presses Enter
  function t.line(text)
    t.type(text)
    t.press("Enter")
  end
  local _, ok = sh(tmux .. " new-session -d -s dle -x 100 -y 40 " .. q(command))
  assert(ok, "tmux new-session failed")
  return t
end

describe("the REPL on a terminal (tmux)", function()
  if not has_tmux then
    pending("skipped: tmux is not installed (apt-get install tmux)")
    return
  end
  if not has_readline then
    pending("skipped: lua-readline is not installed (apt-get install lua-readline)")
    return
  end

  local function session()
    local t = terminal()
    finally(t.close)
    t.wait_for("dle> ")
    return t
  end

  it("shows the banner with Tab completion on, prints =expr and keeps a local for the next line", function()
    local t = session()
    assert.truthy(t.screen():find("Tab completes", 1, true), t.screen())
    t.line("=1+1")
    t.wait_for("dle> =1+1\n2\n")
    t.line("local y = 5")
    t.line("y")
    t.wait_for("dle> local y = 5\ndle> y\n5\n")
  end)

  it("continues a multi-line for loop behind the >> prompt and runs it at its end", function()
    local t = session()
    t.line("for i = 1, 3 do")
    t.wait_for(">> ")
    t.line("io.write(i * 10, ' ')")
    t.line("end")
    t.wait_for("dle> for i = 1, 3 do\n>> io.write(i * 10, ' ')\n>> end\n10 20 30 ")
  end)

  it("prints help(dle.ones): the doc comment of the API reference", function()
    local t = session()
    t.line("help(dle.ones)")
    t.wait_for("dle> help(dle.ones)\nReturns a tensor filled with ones.\n")
    t.wait_for("@treturn dle.Tensor")
  end)

  it("lists the completions of dle.am on a second Tab, the lazily loaded dle.amp among them", function()
    local t = session()
    t.type("dle.am")
    t.press("Tab", "Tab")
    local screen = t.wait_for("dle.amp")
    assert.truthy(screen:find("dle.amax%s+dle.amin%s+dle.amp%s*\n"), screen)
    -- the line is kept: completing after the dot loads dle.amp and finds its class
    t.type("p.GradSc")
    t.press("Tab")
    t.wait_for("dle> dle.amp.GradScaler")
  end)

  it("completes m:par to m:parameters on a module instance", function()
    local t = session()
    t.line("m = dle.nn.Linear(2, 2)")
    t.wait_for("dle> m = dle.nn.Linear(2, 2)\ndle> ")   -- Tab goes to readline only once it reads again
    t.type("#m:par")
    t.press("Tab")
    t.wait_for("dle> #m:parameters")
    t.line("()")
    t.wait_for("dle> #m:parameters()\n2\n")
  end)

  it("recalls the previous line with the Up arrow", function()
    local t = session()
    t.line("=40 + 2")
    t.wait_for("42\n")
    t.press("Up")
    t.wait_for("dle> =40 + 2", 2)
    t.press("Enter")
    local screen = t.wait_for("dle> =40 + 2\n42\n", 2)
    assert.are.equal(2, count(screen, "42\n"), screen)
  end)
end)
