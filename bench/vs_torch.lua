--- bench/vs_torch.lua — the entry of a figure timed in milliseconds beside the same work in PyTorch:
-- vs_torch(key, name, max, rounds, setup_dle, torch_setup, torch_body) returns it. max: the target,
-- at most max times PyTorch's time (nil: no target); rounds: alternating rounds (nil: one);
-- setup_dle() returns the timed function; torch_setup and torch_body are Python (the body timed).
return function(key, name, max, rounds, setup_dle, torch_setup, torch_body)
  return {
    key = key, name = name, unit = "ms", scale = 1e3, target = max and {ref = "PyTorch", max = max}, rounds = rounds,
    dle = setup_dle,
    refs = {{kind = "torch", label = "PyTorch", setup = torch_setup, body = torch_body}},
  }
end
