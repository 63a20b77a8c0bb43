provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "cache" {
  name     = "rg-cache"
  location = "westeurope"
}

resource "azurerm_redis_cache" "main" {
  name                 = "redis-acme"
  location             = azurerm_resource_group.cache.location
  resource_group_name  = azurerm_resource_group.cache.name
  capacity             = 1
  family               = "C"
  sku_name             = "Standard"
  non_ssl_port_enabled = false
  minimum_tls_version  = "1.2"

  redis_configuration {
    maxmemory_policy = "allkeys-lru"
  }
}
