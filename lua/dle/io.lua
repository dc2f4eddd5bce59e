--- dle.io: placeholder until the file formats land (being written now).
return function(dle) end
