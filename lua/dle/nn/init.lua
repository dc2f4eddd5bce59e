--- dle.nn: placeholder until the nn package lands (being written now).
return {}
