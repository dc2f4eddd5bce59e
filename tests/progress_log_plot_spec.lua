--- progress_log_plot_spec.lua — dle.progress (counts, rate, ETA, live values; plain lines when
-- not on a terminal), dle.log.open (JSON lines read back by lua-cjson) and dle.plot (SVG parsed as
-- XML by lua-expat: axes, ticks, legend, one polyline per series), and dle.log staying the
-- elementwise log when called.
local dle = require("dle")
local H = require("helpers")
local dir = H.tmpdir()

-- a file-like sink collecting what the bar writes
local function sink()
  local s = {parts = {}}
  function s:write(...) for _, p in ipairs({...}) do self.parts[#self.parts + 1] = p end return self end
  function s:flush() end
  function s:text() return table.concat(self.parts) end
  return s
end

describe("dle.progress", function()
  it("iterates a count, a list and an iterator, printing count/total, rate, ETA and live values", function()
    local out = sink()
    local seen = {}
    local bar = dle.progress(5, {desc = "epoch", out = out, every = 0})
    for i in bar do seen[#seen + 1] = i; bar:set{loss = 1 / i} end
    assert.are.same({1, 2, 3, 4, 5}, seen)
    local text = out:text()
    assert.truthy(text:find("epoch", 1, true))
    assert.truthy(text:find("5/5", 1, true), text)
    assert.truthy(text:find("100%", 1, true))
    assert.truthy(text:find("it/s", 1, true))
    assert.truthy(text:find("loss=0.2", 1, true), text)
    assert.is_nil(text:find("\r", 1, true), "no carriage returns when the output is not a terminal")
    local vals = {}
    for i, v in dle.progress({"a", "b"}, {out = sink()}) do vals[i] = v end
    assert.are.same({"a", "b"}, vals)
    local k = 0
    local it = function() k = k + 1; if k <= 3 then return k end end
    local o2 = sink()
    for _ in dle.progress(it, {total = 3, out = o2}) do end
    assert.truthy(o2:text():find("3/3", 1, true), o2:text())
  end)

  it("iterates a DataLoader (the generic for's protocol) with its length as the total", function()
    local loader = dle.data.DataLoader({dle.arange(0, 10), dle.arange(0, 10)}, {batch_size = 3})
    local out, batches, rows = sink(), 0, 0
    for x, y in dle.progress(loader, {out = out}) do
      batches, rows = batches + 1, rows + x:size(1)
      assert.are.same(x:totable(), y:totable())
    end
    assert.are.equal(4, batches)
    assert.are.equal(10, rows)
    assert.truthy(out:text():find("4/4", 1, true), out:text())
  end)

  it("prints plain lines at most every `every` seconds, and a final line", function()
    local out = sink()
    local bar = dle.progress(1000, {out = out, every = 3600})
    for _ in bar do end
    local lines = 0
    for _ in out:text():gmatch("\n") do lines = lines + 1 end
    assert.are.equal(1, lines, out:text())
  end)

  it("prints each state once with every = 0: no repeated final line", function()
    local out = sink()
    local bar = dle.progress(3, {out = out, every = 0})
    for _ in bar do end
    local lines = {}
    for line in out:text():gmatch("[^\n]+") do lines[#lines + 1] = line:match("%d+/3") end
    assert.are.same({"1/3", "2/3", "3/3"}, lines, out:text())
    local empty = sink()
    dle.progress(0, {out = empty}):close()
    assert.truthy(empty:text():find("0/0", 1, true), "a bar with nothing done still prints its line")
  end)

  it("prints a script's lines above the bar with bar:print", function()
    local out, printed = sink(), {}
    local real = io.stdout
    io.stdout = {write = function(_, ...) for _, p in ipairs({...}) do printed[#printed + 1] = p end end,
                 flush = function() end}
    local ok, err = pcall(function()
      local bar = dle.progress(2, {out = out, every = 3600})
      bar:print("step 1 report")
      for _ in bar do end
    end)
    io.stdout = real
    assert(ok, err)
    assert.are.equal("step 1 report\n", table.concat(printed))
    assert.matches("progress:print: text must be a string", select(2, pcall(dle.progress(1).print, dle.progress(1), 5)))
  end)

  it("bad arguments are errors naming progress", function()
    assert.matches("progress: expected a count", select(2, pcall(dle.progress, "x")))
    assert.matches("progress: unknown option", select(2, pcall(dle.progress, 3, {bogus = 1})))
    assert.matches("progress: a count must not be negative", select(2, pcall(dle.progress, -1)))
  end)
end)

describe("dle.log", function()
  it("is still the elementwise log when called", function()
    assert.is_true(math.abs(dle.log(dle.tensor({math.exp(2)})):item() - 2) < 1e-6)
  end)

  it("appends JSON lines with sorted keys; NaN as null, one-element tensors as numbers", function()
    local path = dir .. "/run.jsonl"
    local log = dle.log.open(path, {truncate = true})
    log:write{step = 1, loss = 0.5, name = "a\"b", ok = true}
    log:write{step = 2, loss = 0 / 0, t = dle.tensor({3.5})}
    log:close()
    local cjson = require("cjson")
    local lines = {}
    for l in io.lines(path) do lines[#lines + 1] = l end
    assert.are.equal(2, #lines)
    assert.are.equal('{"loss":0.5,"name":"a\\"b","ok":true,"step":1}', lines[1])
    local second = cjson.decode(lines[2])
    assert.are.equal(cjson.null, second.loss)
    assert.are.equal(3.5, second.t)
    local again = dle.log.open(path)
    again:write{step = 3}
    again:close()
    local n = 0
    for _ in io.lines(path) do n = n + 1 end
    assert.are.equal(3, n, "opening again appends")
    local l2 = dle.log.open(dir .. "/bad.jsonl")
    assert.matches("log:write: x is a function", select(2, pcall(l2.write, l2, {x = print})))
    assert.matches("one%-element", select(2, pcall(l2.write, l2, {t = dle.zeros(2)})))
  end)
end)

describe("dle.plot", function()
  local parse = H.svg_elements

  it("writes an SVG with axes, ticks, a legend and one polyline per series", function()
    local path = dir .. "/curves.svg"
    dle.plot.lines(path, {train = {3, 2, 1.5, 1.2}, val = {{1, 2.5}, {4, 1.4}}}, {title = "loss <&>", xlabel = "epoch"})
    local elements, texts = parse(path)
    assert.are.equal("svg", elements[1].name)
    local polylines, legend = 0, {}
    for _, e in ipairs(elements) do
      if e.name == "polyline" then polylines = polylines + 1 end
      if e.name == "text" and e.attrs.class == "legend" then legend[#legend + 1] = true end
    end
    assert.are.equal(2, polylines)
    assert.are.equal(2, #legend)
    local all = table.concat(texts, "|")
    assert.truthy(all:find("train", 1, true) and all:find("val", 1, true))
    assert.truthy(all:find("loss <&>", 1, true), all)
    assert.truthy(all:find("epoch", 1, true))
    assert.truthy(all:find("|1.5|", 1, true) or all:find("|2|", 1, true), "tick labels: " .. all)
  end)

  -- headless Chromium renders the chart to a PNG; Python's PIL counts its pixels
  local chromium = H.exists("/usr/bin/chromium") and os.execute("/usr/bin/python3 -c 'import PIL' 2>/dev/null")
  local it_browser = chromium and it or function(name)
    pending(name .. " (needs the Debian packages chromium and python3-pil)")
  end
  it_browser("opens in a browser: headless Chromium's screenshot shows the axes and both series' colours", function()
    local svg, png = dir .. "/browser.svg", dir .. "/browser.png"
    dle.plot.lines(svg, {train = {3, 2, 1.5, 1.2, 1.1}, val = {2.8, 2.2, 1.9, 1.8, 1.8}}, {title = "loss"})
    local cmd = ("timeout 60 /usr/bin/chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
                 .. "--window-size=800,600 --screenshot=%s file://%s >/dev/null 2>&1"):format(png, svg)
    assert.is_true(os.execute(cmd) == true, "chromium failed: " .. cmd)
    -- pixels: dark ones (axes, text), and strongly coloured ones (the lines) in at least two hues
    local out = H.run_python({
      "from PIL import Image",
      "im = Image.open(" .. string.format("%q", png) .. ").convert('RGB')",
      "px = list(im.getdata())",
      "dark = sum(1 for r, g, b in px if r + g + b < 300)",
      "hues = {(r > b + 60) - (b > r + 60) for r, g, b in px if max(r, g, b) - min(r, g, b) > 80}",
      "print(im.size[0], im.size[1], dark, len(hues - {0}))",
    })
    local w, h, dark, hues = out[#out]:match("^(%d+) (%d+) (%d+) (%d+)$")
    assert.are.same({"800", "600"}, {w, h}, table.concat(out, "\n"))
    assert.is_true(tonumber(dark) > 300, "dark pixels (axes, ticks, labels): " .. dark)
    assert.are.equal("2", hues, "two line colours, one reddish and one bluish")
  end)

  it("plots a JSONL log's keys against its steps; bad series are errors naming plot.lines", function()
    local log = dle.log.open(dir .. "/p.jsonl", {truncate = true})
    for s = 1, 10 do log:write{step = s * 10, loss = 1 / s, acc = s / 10} end
    log:close()
    dle.plot.from_log(dir .. "/p.jsonl", dir .. "/p.svg", {"loss", "acc"})
    local elements = parse(dir .. "/p.svg")
    local n = 0
    for _, e in ipairs(elements) do
      if e.name == "polyline" then
        n = n + 1
        local count = 0
        for _ in e.attrs.points:gmatch("%S+") do count = count + 1 end
        assert.are.equal(10, count)
      end
    end
    assert.are.equal(2, n)
    assert.matches("plot.lines: series x item 2", select(2, pcall(dle.plot.lines, dir .. "/x.svg", {x = {1, "a"}})))
  end)
end)
