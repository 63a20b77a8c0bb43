# A Kubernetes application module: a namespace and a deployment with nested blocks.
module "app" {
  source = "./modules/app"

  name     = "web"
  image    = "nginx:1.27"
  replicas = 2
}

output "namespace" {
  value = module.app.namespace
}
