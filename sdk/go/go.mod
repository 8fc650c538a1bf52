module spindle/sdk/go

go 1.19
