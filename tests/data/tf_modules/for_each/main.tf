# A bucket module called once per entry of a map (for_each), with a validated input.
locals {
  buckets = {
    logs   = { versioned = true }
    assets = { versioned = false }
  }
}

module "bucket" {
  source   = "./modules/bucket"
  for_each = local.buckets

  name      = "acme-${each.key}"
  versioned = each.value.versioned
}

resource "aws_s3_bucket_policy" "logs" {
  bucket = module.bucket["logs"].id
  policy = jsonencode({ Version = "2012-10-17", Statement = [] })
}
