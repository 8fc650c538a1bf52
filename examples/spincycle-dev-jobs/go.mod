module spincycle-dev-jobs

go 1.19

require spindle/sdk/go v0.0.0

replace spindle/sdk/go => ../../sdk/go
