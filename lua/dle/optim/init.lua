--- dle.optim: placeholder until the optimizers land (being written now).
return {}
