# A registry module, vendored by `terraform init` under .terraform/modules (modules.json).
module "logs" {
  source  = "acme/log-bucket/aws"
  version = "1.2.0"

  name = "acme-logs"
}

output "bucket_arn" {
  value = module.logs.arn
}
