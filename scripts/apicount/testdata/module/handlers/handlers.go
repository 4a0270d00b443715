package handlers

// Entry is a value named as durable's type.
var Entry = 1
