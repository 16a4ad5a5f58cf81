module chutney/bindings/go

go 1.19
