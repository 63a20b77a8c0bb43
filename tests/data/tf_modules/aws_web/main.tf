# A web tier module: a load balancer target group with a health check and an instance.
module "web" {
  source = "./modules/web"

  name   = "shop"
  vpc_id = "vpc-0123456789abcdef0"
  port   = 8080
}

output "target_group" {
  value = module.web.target_group_arn
}
