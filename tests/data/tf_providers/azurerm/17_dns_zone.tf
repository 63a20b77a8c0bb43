provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "dns" {
  name     = "rg-dns"
  location = "westeurope"
}

resource "azurerm_dns_zone" "public" {
  name                = "acme.example.com"
  resource_group_name = azurerm_resource_group.dns.name

  soa_record {
    email       = "hostmaster.acme.example.com"
    ttl         = 3600
    expire_time = 2419200
  }
}

resource "azurerm_dns_a_record" "www" {
  name                = "www"
  zone_name           = azurerm_dns_zone.public.name
  resource_group_name = azurerm_resource_group.dns.name
  ttl                 = 300
  records             = ["203.0.113.20"]
}
