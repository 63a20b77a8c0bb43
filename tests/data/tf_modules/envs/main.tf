# An environment module called per environment (for_each) that calls a queue module with count.
module "env" {
  source   = "./modules/env"
  for_each = toset(["dev", "prod"])

  env    = each.key
  queues = each.key == "prod" ? 2 : 1
}

output "queue_urls" {
  value = { for k, m in module.env : k => m.queue_urls }
}
