--- dle.data: placeholder until the data package lands (being written now).
return {}
